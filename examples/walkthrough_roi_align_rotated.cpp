// walkthrough_roi_align_rotated: rotated RoIAlign (AerialDetection's MMDetection-based kernel, in detectron2's
// angle convention, with minidet's backward: docs/references.md), sample by sample, on a tiny feature map.
//
//   walkthrough_roi_align_rotated [--angle 30] [--clockwise] [--sampling 2] [--legacy]
//
// 1. The RoI (cx, cy, w, h, angle) is scaled to feature pixels (aligned: minus half a pixel), cut into
//    2 x 2 bins of the box's own axes, and each bin into sampling x sampling sample points.
// 2. Each sample is placed in the box frame (u, v), turned by the angle (counter-clockwise on screen unless
//    --clockwise) and moved to the centre. A picture of the map shows where the rotated grid lands.
// 3. Each sample reads the map bilinearly from its four neighbours; a bin's output is the mean of its
//    samples (a sample outside [-1, H] x [-1, W] reads 0 and still counts).
// 4. Backward: each bin's upstream gradient is split equally among its samples, and each sample's share
//    lands on its four neighbours with the same bilinear weights. The final input-gradient map is checked
//    against minidet::roi_align_rotated's autograd (and against the CUDA kernels when a GPU is present).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cuda/availability.h"
#include "core/factories.h"
#include "ops/common/bilinear.h"
#include "ops/roi_align_rotated/roi_align_rotated.h"
#include "ops/roi_align_rotated/roi_align_rotated_kernels.h"  // rotated_frame, rotated_sample: the kernels' own

using namespace minidet;
using ops::BilinearSample;

namespace {

constexpr int64_t kHeight = 6, kWidth = 7, kBins = 2;

void print_map(const char* title, const std::vector<double>& values) {
  std::printf("%s\n      ", title);
  for (int64_t x = 0; x < kWidth; ++x) std::printf("  w=%-4lld", (long long)x);
  std::printf("\n");
  for (int64_t y = 0; y < kHeight; ++y) {
    std::printf("  h=%lld", (long long)y);
    for (int64_t x = 0; x < kWidth; ++x) std::printf(" %7.3f", values[y * kWidth + x]);
    std::printf("\n");
  }
  std::printf("\n");
}

// The map from (x, y) = (-1, -1) to (W, H), 4 characters per pixel across and 2 lines per pixel down:
// '.' marks a pixel, 'a'..'d' the samples of bins (0,0), (0,1), (1,0), (1,1), 'o' the box centre.
void draw_grid(const std::vector<double>& sample_x, const std::vector<double>& sample_y,
               const std::vector<int64_t>& sample_bin, double center_x, double center_y) {
  const int64_t columns = (kWidth + 1) * 4 + 1, rows = (kHeight + 1) * 2 + 1;
  std::vector<std::string> canvas(rows, std::string(columns, ' '));
  const auto put = [&](double x, double y, char mark) {
    const long column = std::lround((x + 1) * 4), row = std::lround((y + 1) * 2);
    if (column >= 0 && column < columns && row >= 0 && row < rows) canvas[row][column] = mark;
  };
  for (int64_t y = 0; y < kHeight; ++y)
    for (int64_t x = 0; x < kWidth; ++x) put(double(x), double(y), '.');
  put(center_x, center_y, 'o');
  for (size_t s = 0; s < sample_x.size(); ++s) put(sample_x[s], sample_y[s], char('a' + sample_bin[s]));
  std::printf("Where the samples land ('.' pixel (h, w), 'o' the centre, a b / c d the bins (0,0) (0,1) / (1,0) (1,1)):\n");
  std::printf("        ");
  for (int64_t x = -1; x <= kWidth; ++x) std::printf("%-4lld", (long long)x);
  std::printf("  <- x (w)\n");
  for (int64_t r = 0; r < rows; ++r) {
    if (r % 2 == 0) std::printf("  y=%2lld ", (long long)(r / 2 - 1));
    else std::printf("        ");
    std::printf("%s\n", canvas[r].c_str());
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Rotated RoIAlign forward and backward, sample by sample"};
  double angle_degrees = 30;
  bool clockwise = false, legacy = false;
  int64_t sampling = 2;
  app.add_option("--angle", angle_degrees, "RoI angle in degrees (stored in radians in the rois)")->capture_default_str();
  app.add_flag("--clockwise", clockwise, "the angle turns the box clockwise on screen");
  app.add_option("--sampling", sampling, "samples per bin along each box axis (0: adaptive)")->check(CLI::Range(0, 4))->capture_default_str();
  app.add_flag("--legacy", legacy, "aligned = false: no half-pixel shift, minimum box size 1");
  CLI11_PARSE(app, argc, argv);

  // One image, one channel, 6 x 7 feature pixels holding 0..41 in random order.
  Generator g(5);
  const Tensor features = randperm(kHeight * kWidth, kInt64, &g).to(kFloat64).view({1, 1, kHeight, kWidth});
  const std::vector<double> map = features.to_vector<double>();
  print_map("The feature map x[0, 0] (6 x 7):", map);

  const double angle = angle_degrees * 3.14159265358979323846 / 180.0;
  const std::vector<double> roi = {0, 7, 5, 8, 4, angle};  // (batch, cx, cy, w, h, angle) in image pixels
  const RoIAlignRotatedOptions options = RoIAlignRotatedOptions()
                                             .set_output_size(kBins)
                                             .set_spatial_scale(0.5)
                                             .set_sampling_ratio(sampling)
                                             .set_aligned(!legacy)
                                             .set_clockwise(clockwise);
  ops::detail::RotatedGeometry geometry;
  geometry.num_rois = 1;
  geometry.channels = 1;
  geometry.height = kHeight;
  geometry.width = kWidth;
  geometry.pooled_h = geometry.pooled_w = kBins;
  geometry.spatial_scale = options.spatial_scale;
  geometry.sampling_ratio = options.sampling_ratio;
  geometry.aligned = options.aligned;
  geometry.clockwise = options.clockwise;
  const ops::detail::RotatedFrame<double> f = ops::detail::rotated_frame(roi.data(), geometry);

  std::printf("RoI (cx %g, cy %g, w %g, h %g, angle %g rad = %g degrees), spatial_scale %g, aligned %s, %s\n", roi[1],
              roi[2], roi[3], roi[4], angle, angle_degrees, options.spatial_scale, options.aligned ? "true" : "false",
              clockwise ? "clockwise" : "counter-clockwise");
  std::printf("  centre in feature pixels: (x %g, y %g)%s\n", f.center_x, f.center_y,
              options.aligned ? "  (s*cx - 0.5: pixel centres sit on integers)" : "");
  std::printf("  box %g x %g feature pixels, bins %g x %g, %lld x %lld samples per bin (count %g)\n", -2 * f.start_u,
              -2 * f.start_v, -2 * f.start_u / kBins, -2 * f.start_v / kBins, (long long)f.grid_h, (long long)f.grid_w,
              f.count);
  std::printf("  theta = %g: the box's x axis points along (cos, -sin) = (%.3f, %.3f) in (x, y)\n",
              clockwise ? -angle : angle, f.cos_theta, -f.sin_theta);
  std::printf("  a sample at (u, v) in the box frame lands at x = cx + u cos + v sin, y = cy - u sin + v cos\n\n");

  // Forward, sample by sample.
  std::vector<BilinearSample<double>> samples;
  std::vector<double> sample_x, sample_y, output(kBins * kBins, 0.0);
  std::vector<int64_t> sample_bin;
  for (int64_t p = 0; p < kBins; ++p)
    for (int64_t q = 0; q < kBins; ++q) {
      std::printf("Bin (%lld, %lld):\n", (long long)p, (long long)q);
      double sum = 0;
      for (int64_t iy = 0; iy < f.grid_h; ++iy)
        for (int64_t ix = 0; ix < f.grid_w; ++ix) {
          const int64_t i = p * f.grid_h + iy, j = q * f.grid_w + ix;
          double y, x;
          ops::detail::rotated_sample(f, i, j, &y, &x);
          const BilinearSample<double> s = ops::bilinear_sample(y, x, kHeight, kWidth);
          const double value = ops::bilinear_interpolate(s, map.data());
          std::printf("  sample (%lld, %lld): box frame (u %6.3f, v %6.3f) -> map (x %6.3f, y %6.3f): ", (long long)iy,
                      (long long)ix, f.start_u + (j + 0.5) * f.step_u, f.start_v + (i + 0.5) * f.step_v, x, y);
          if (!s.inside) {
            std::printf("outside [-1, H] x [-1, W], reads 0\n");
          } else {
            for (int n = 0; n < 4; ++n)
              std::printf("%s(h%lld,w%lld)*%.3f", n ? " + " : "", (long long)(s.offset[n] / kWidth),
                          (long long)(s.offset[n] % kWidth), s.weight[n]);
            std::printf(" = %.3f\n", value);
          }
          sum += value;
          samples.push_back(s);
          sample_x.push_back(x);
          sample_y.push_back(y);
          sample_bin.push_back(p * kBins + q);
        }
      output[p * kBins + q] = sum / f.count;
      std::printf("  output = %.4f / %g = %.4f\n\n", sum, f.count, output[p * kBins + q]);
    }
  draw_grid(sample_x, sample_y, sample_bin, f.center_x, f.center_y);

  // Backward with upstream gradient dy[p, q] = p*2 + q + 1.
  const std::vector<double> upstream = {1, 2, 3, 4};
  std::printf("Backward: dy = [[1, 2], [3, 4]]. Each sample of bin (p, q) carries dy / count and hands it to its\n"
              "neighbours with its bilinear weights:\n");
  std::vector<double> landed(kHeight * kWidth, 0.0);
  const int64_t per_bin = f.grid_h * f.grid_w;
  for (size_t s = 0; s < samples.size(); ++s) {
    const double share = upstream[sample_bin[s]] / f.count;
    std::printf("  bin (%lld, %lld) sample %lld, share %.3f:", (long long)(sample_bin[s] / kBins),
                (long long)(sample_bin[s] % kBins), (long long)(s % per_bin), share);
    if (!samples[s].inside) {
      std::printf(" outside the map, lands nowhere\n");
      continue;
    }
    for (int n = 0; n < 4; ++n) {
      landed[samples[s].offset[n]] += share * samples[s].weight[n];
      std::printf(" (h%lld,w%lld) += %.4f", (long long)(samples[s].offset[n] / kWidth),
                  (long long)(samples[s].offset[n] % kWidth), share * samples[s].weight[n]);
    }
    std::printf("\n");
  }
  std::printf("\n");

  const Tensor x = features.clone().requires_grad_();
  const Tensor rois = from_vector<double>(roi, {1, 6});
  const Tensor y = roi_align_rotated(x, rois, options);
  const Tensor dy = from_vector<double>(upstream, y.sizes());
  y.backward(dy);
  const std::vector<double> grad = x.grad().to_vector<double>();
  print_map("The input gradient dL/dx[0, 0]:", grad);

  const auto worst_difference = [](const std::vector<double>& a, const std::vector<double>& b) {
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    return worst;
  };
  const bool agrees = worst_difference(y.to_vector<double>(), output) < 1e-12 && worst_difference(grad, landed) < 1e-12;
  std::printf("minidet::roi_align_rotated gives the same outputs and gradient map: %s\n", agrees ? "yes" : "NO");
  bool gpu_agrees = true;
  if (cuda::is_available()) {
    const Tensor x_gpu = features.cuda().requires_grad_();
    const Tensor y_gpu = roi_align_rotated(x_gpu, rois.cuda(), options);
    y_gpu.backward(dy.cuda());
    gpu_agrees = worst_difference(y_gpu.to_vector<double>(), output) < 1e-9 &&
                 worst_difference(x_gpu.grad().to_vector<double>(), landed) < 1e-9;
    std::printf("The CUDA kernels give the same: %s\n", gpu_agrees ? "yes" : "NO");
  }
  return agrees && gpu_agrees ? 0 : 1;
}
