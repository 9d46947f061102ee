// walkthrough_roi_align: RoIAlign step by step on a tiny feature map, forward and backward.
//
//   walkthrough_roi_align [--roi X1,Y1,X2,Y2] [--scale S] [--size P] [--sampling R] [--legacy] [--max]
//
// Prints, with the same geometry helpers the kernels use (ops/roi_align/roi_align_kernels.h):
//   1. the feature map, the RoI in feature coordinates, the bin size and the sampling grid;
//   2. for every bin, every sampling point with its four neighbours and bilinear weights, and the bin's value,
//      checked against roi_align's output;
//   3. for an upstream gradient, where each bin's gradient lands (pixel += amount), the input-gradient map
//      from roi_align's backward, and the gradient with respect to the box corners.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "core/factories.h"
#include "ops/roi_align/roi_align.h"
#include "ops/roi_align/roi_align_kernels.h"
#include "ops/shape/cat.h"

using namespace minidet;
using ops::detail::RoiAlignGeometry;

namespace {

void print_map(const char* title, const std::vector<double>& v, int64_t height, int64_t width) {
  std::printf("%s\n", title);
  for (int64_t r = 0; r < height; ++r) {
    std::printf("   ");
    for (int64_t c = 0; c < width; ++c) std::printf(" %8.4f", v[r * width + c]);
    std::printf("\n");
  }
}

std::vector<double> parse_box(const std::string& text) {
  std::vector<double> box;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) box.push_back(std::stod(part));
  if (box.size() != 4) throw CLI::ValidationError("--roi", "expected four numbers X1,Y1,X2,Y2");
  return box;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"RoIAlign step by step: sampling points, bilinear weights, outputs, and where gradients land"};
  std::string roi_text = "1.3,0.6,4.9,3.4";
  double scale = 1.0;
  int64_t size = 2, sampling = 2;
  bool legacy = false, max_mode = false;
  app.add_option("--roi", roi_text, "box X1,Y1,X2,Y2 in image pixels");
  app.add_option("--scale", scale, "spatial_scale: feature pixels per image pixel");
  app.add_option("--size", size, "pooled output size (square)");
  app.add_option("--sampling", sampling, "samples per bin per axis (<= 0: adaptive)");
  app.add_flag("--legacy", legacy, "aligned = false: no half-pixel shift, minimum RoI size 1");
  app.add_flag("--max", max_mode, "max pooling of the samples instead of their average");
  CLI11_PARSE(app, argc, argv);
  const std::vector<double> box = parse_box(roi_text);

  // 1. A 5 x 6 feature map whose value tells its position: f(r, c) = 10 r + c.
  const int64_t height = 5, width = 6;
  std::vector<double> features;
  for (int64_t r = 0; r < height; ++r)
    for (int64_t c = 0; c < width; ++c) features.push_back(10.0 * r + c);
  const Tensor input = from_vector<double>(features, {1, 1, height, width}).requires_grad_();
  const Tensor boxes = from_vector<double>(box, {1, 4}).requires_grad_();
  const Tensor rois = cat({zeros({1, 1}, kFloat64), boxes}, 1);
  const auto options = RoIAlignOptions().set_output_size(size).set_spatial_scale(scale).set_sampling_ratio(sampling)
                           .set_aligned(!legacy).set_pool_mode(max_mode ? RoiPoolMode::Max : RoiPoolMode::Avg);

  RoiAlignGeometry g{1, 1, height, width, 1, size, size, scale, sampling, !legacy, max_mode};
  const double roi_row[5] = {0, box[0], box[1], box[2], box[3]};
  const auto b = ops::detail::roi_box(roi_row, g);
  print_map("feature map f(r, c) = 10 r + c (row r = y, column c = x):", features, height, width);
  std::printf("\nRoI (%g, %g)-(%g, %g) in image pixels, spatial_scale %g, %s\n", box[0], box[1], box[2], box[3],
              scale, legacy ? "aligned = false (legacy)" : "aligned = true (shift by -0.5)");
  std::printf("  in feature pixels: starts at (y, x) = (%.4f, %.4f), size %.4f x %.4f%s\n", b.start_y, b.start_x,
              b.roi_h, b.roi_w, legacy ? " (each at least 1)" : "");
  std::printf("  %lld x %lld bins of %.4f x %.4f; %lld x %lld samples per bin%s; %s pooling\n", (long long)size,
              (long long)size, b.roi_h / size, b.roi_w / size, (long long)b.grid_h, (long long)b.grid_w,
              sampling > 0 ? "" : " (adaptive: ceil(roi size / bins))", max_mode ? "max" : "avg");

  // 2. Every sampling point.
  const Tensor output = roi_align(input, rois, options);
  const std::vector<double> out = output.to_vector<double>();
  std::printf("\nforward: each sample reads w00 f(y0,x0) + w01 f(y0,x1) + w10 f(y1,x0) + w11 f(y1,x1)\n");
  std::vector<int64_t> winners(size * size, 0);
  for (int64_t p = 0; p < size; ++p) {
    for (int64_t q = 0; q < size; ++q) {
      std::printf(" bin (%lld, %lld):\n", (long long)p, (long long)q);
      double sum = 0, best = 0;
      for (int64_t s = 0; s < b.count(); ++s) {
        const auto sample = ops::detail::roi_sample(b, p, q, s, g);
        const auto& w = sample.bilinear;
        const double y = b.start_y + sample.a_y * b.roi_h, x = b.start_x + sample.a_x * b.roi_w;
        const double v = ops::bilinear_interpolate(w, features.data());
        std::printf("   sample (y %.4f, x %.4f)", y, x);
        if (!w.inside) {
          std::printf("  outside [-1, H] x [-1, W]: reads 0\n");
        } else {
          for (int j = 0; j < 4; ++j)
            std::printf("  (%lld,%lld)*%.4f", (long long)(w.offset[j] / width), (long long)(w.offset[j] % width),
                        w.weight[j]);
          std::printf("  = %.4f\n", v);
        }
        sum += v;
        if (s == 0 || ops::detail::max_sample_wins(v, best)) {
          best = v;
          winners[p * size + q] = s;
        }
      }
      const double value = max_mode ? best : sum / double(b.count());
      std::printf("   -> %s = %.4f   (roi_align says %.4f)\n", max_mode ? "max" : "mean", value, out[p * size + q]);
    }
  }

  // 3. Backward for an upstream gradient 1, 2, 3, ... over the bins.
  std::vector<double> upstream;
  for (int64_t i = 0; i < size * size; ++i) upstream.push_back(double(i + 1));
  std::printf("\nbackward: upstream gradient dL/dout = 1, 2, 3, ... (row-major over the bins)\n");
  for (int64_t p = 0; p < size; ++p) {
    for (int64_t q = 0; q < size; ++q) {
      const double grad = upstream[p * size + q];
      std::printf(" bin (%lld, %lld), gradient %g%s:", (long long)p, (long long)q, grad,
                  max_mode ? " all to the winning sample" : " shared equally by its samples");
      for (int64_t s = 0; s < b.count(); ++s) {
        if (max_mode && s != winners[p * size + q]) continue;
        const auto w = ops::detail::roi_sample(b, p, q, s, g).bilinear;
        const double share = max_mode ? grad : grad / double(b.count());
        for (int j = 0; j < 4 && w.inside; ++j)
          if (w.weight[j] != 0)
            std::printf(" (%lld,%lld)+=%.4f", (long long)(w.offset[j] / width), (long long)(w.offset[j] % width),
                        share * w.weight[j]);
      }
      std::printf("\n");
    }
  }
  output.backward(from_vector<double>(upstream, output.sizes()));
  print_map("\ninput gradient (the sum of everything that landed):", input.grad().to_vector<double>(), height, width);
  const std::vector<double> box_grad = boxes.grad().to_vector<double>();
  std::printf("\nbox gradient dL/d(x1, y1, x2, y2) = (%.4f, %.4f, %.4f, %.4f)\n", box_grad[0], box_grad[1],
              box_grad[2], box_grad[3]);
  std::printf("  (f grows by 1 per column and 10 per row: moving the box moves every sample over that slope)\n");
  return 0;
}
