// walkthrough_roi_pool: RoIPool (MMDetection's v1 CUDA kernel, roi_pool_kernel.cu: docs/references.md), bin
// by bin, forward and backward, on a tiny feature map.
//
//   walkthrough_roi_pool [--output-size 3] [--scale 0.5] [--seed 2]
//
// 1. Each RoI (in image pixels) is scaled to feature pixels with mmdet's "+1" on x2 and y2, and cut
//    into output_size x output_size bins of equal real size; no rounding of the box.
// 2. Each bin covers the pixels from floor(its start) to ceil(its end), clipped to the map; neighbouring bins
//    can share a row or a column. The bin's maximum and its position (the argmax) are printed; an empty bin
//    outputs 0 with argmax -1.
// 3. Backward: each bin's upstream gradient lands on its argmax pixel, nowhere else; pixels picked by several
//    bins add them up. The final input-gradient map is printed and checked against minidet::roi_pool's
//    autograd (and against the CUDA kernels when a GPU is present).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/cuda/availability.h"
#include "core/factories.h"
#include "ops/roi_pool/roi_pool.h"
#include "ops/roi_pool/roi_pool_kernels.h"  // roi_pool_bin: the exact bins both kernels cut

using namespace minidet;

namespace {

void print_map(const char* title, const std::vector<double>& values, int64_t height, int64_t width) {
  std::printf("%s\n      ", title);
  for (int64_t x = 0; x < width; ++x) std::printf(" w=%-4lld", (long long)x);
  std::printf("\n");
  for (int64_t y = 0; y < height; ++y) {
    std::printf("  h=%lld", (long long)y);
    for (int64_t x = 0; x < width; ++x) std::printf(" %6.2f", values[y * width + x]);
    std::printf("\n");
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"RoIPool forward and backward, bin by bin"};
  int64_t output_size = 3;
  double scale = 0.5;
  uint64_t seed = 2;
  app.add_option("--output-size", output_size, "bins per side")->check(CLI::Range(1, 6))->capture_default_str();
  app.add_option("--scale", scale, "spatial_scale: feature pixels per image pixel")->check(CLI::Range(0.1, 2.0))->capture_default_str();
  app.add_option("--seed", seed, "random seed for the feature values")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // One image, one channel, 6 x 8 feature pixels holding 0..47 in random order (distinct: no ties).
  const int64_t height = 6, width = 8;
  Generator g(seed);
  const Tensor features = randperm(height * width, kInt64, &g).to(kFloat64).view({1, 1, height, width});
  const std::vector<double> map = features.to_vector<double>();
  print_map("The feature map x[0, 0] (6 x 8):", map, height, width);

  // RoI 0 reaches past the right border; RoI 1 lies mostly above and right of the map (empty bins).
  const std::vector<double> roi_rows = {0, 5, 3, 16, 12,  //
                                        0, 13, -4, 20, 3};
  const int64_t count = 2;
  const Tensor rois = from_vector<double>(roi_rows, {count, 5});
  const Tensor x = features.clone().requires_grad_();
  const RoIPoolResult result = roi_pool_with_argmax(x, rois, {output_size, output_size}, scale);
  const std::vector<double> output = result.output.to_vector<double>();
  const std::vector<int64_t> argmax = result.argmax.to_vector<int64_t>();

  ops::detail::RoIPoolGeometry geometry;
  geometry.num_rois = count;
  geometry.channels = 1;
  geometry.height = height;
  geometry.width = width;
  geometry.pooled_height = geometry.pooled_width = output_size;
  geometry.spatial_scale = scale;
  const int64_t bins = output_size * output_size;

  for (int64_t k = 0; k < count; ++k) {
    const double* roi = &roi_rows[5 * k];
    const double x1 = roi[1] * scale, y1 = roi[2] * scale, x2 = (roi[3] + 1) * scale, y2 = (roi[4] + 1) * scale;
    std::printf("RoI %lld: image box (x1 %g, y1 %g, x2 %g, y2 %g), spatial_scale %g\n", (long long)k, roi[1], roi[2],
                roi[3], roi[4], scale);
    std::printf("  feature box: X1 = x1*s = %g, Y1 = %g, X2 = (x2+1)*s = %g, Y2 = %g  (width %g, height %g)\n", x1, y1,
                x2, y2, x2 - x1, y2 - y1);
    std::printf("  bin size: %g wide, %g high (%lld x %lld bins)\n", (x2 - x1) / output_size, (y2 - y1) / output_size,
                (long long)output_size, (long long)output_size);
    for (int64_t p = 0; p < output_size; ++p)
      for (int64_t q = 0; q < output_size; ++q) {
        const ops::detail::RoIPoolBin bin = ops::detail::roi_pool_bin(roi, geometry, p, q);
        const int64_t o = k * bins + p * output_size + q;
        std::printf("  bin (%lld, %lld): rows [%lld, %lld) cols [%lld, %lld)", (long long)p, (long long)q,
                    (long long)bin.y0, (long long)bin.y1, (long long)bin.x0, (long long)bin.x1);
        if (bin.empty()) {
          std::printf("  empty after clipping -> output 0, argmax -1\n");
          continue;
        }
        std::printf("  %lld pixel(s), max %g at (h %lld, w %lld), argmax %lld\n",
                    (long long)((bin.y1 - bin.y0) * (bin.x1 - bin.x0)), output[o], (long long)(argmax[o] / width),
                    (long long)(argmax[o] % width), (long long)argmax[o]);
      }
    std::printf("  output y[%lld, 0]:\n", (long long)k);
    for (int64_t p = 0; p < output_size; ++p) {
      std::printf("   ");
      for (int64_t q = 0; q < output_size; ++q) std::printf(" %6.2f", output[k * bins + p * output_size + q]);
      std::printf("\n");
    }
    std::printf("\n");
  }

  // Backward with upstream gradient dy[k, 0, p, q] = 0.1 * (bin number + 1) (distinct, so each share can be
  // traced in the final map).
  std::vector<double> upstream(count * bins);
  for (size_t i = 0; i < upstream.size(); ++i) upstream[i] = 0.1 * double(i % bins + 1);
  std::printf("Backward: dy[k, 0, p, q] = 0.1 * (p*%lld + q + 1). Each bin sends all of it to its argmax:\n",
              (long long)output_size);
  std::vector<double> landed(height * width, 0.0);
  for (int64_t k = 0; k < count; ++k)
    for (int64_t b = 0; b < bins; ++b) {
      const int64_t o = k * bins + b, pixel = argmax[o];
      std::printf("  RoI %lld bin (%lld, %lld): dy %.1f -> ", (long long)k, (long long)(b / output_size),
                  (long long)(b % output_size), upstream[o]);
      if (pixel < 0) {
        std::printf("nowhere (empty bin)\n");
        continue;
      }
      landed[pixel] += upstream[o];
      std::printf("pixel (h %lld, w %lld), which now holds %.1f\n", (long long)(pixel / width),
                  (long long)(pixel % width), landed[pixel]);
    }
  std::printf("\n");
  const Tensor dy = from_vector<double>(upstream, result.output.sizes());
  result.output.backward(dy);
  const std::vector<double> grad = x.grad().to_vector<double>();
  print_map("The input gradient dL/dx[0, 0] (every other pixel gets 0):", grad, height, width);

  const bool agrees = grad == landed;
  std::printf("minidet::roi_pool's autograd gives the same gradient map: %s\n", agrees ? "yes" : "NO");
  bool gpu_agrees = true;
  if (cuda::is_available()) {
    const Tensor x_gpu = features.cuda().requires_grad_();
    const RoIPoolResult on_gpu = roi_pool_with_argmax(x_gpu, rois.cuda(), {output_size, output_size}, scale);
    on_gpu.output.backward(dy.cuda());
    // The GPU adds a pixel's shares with atomics, in any order: equal up to rounding, not bit for bit.
    const std::vector<double> grad_gpu = x_gpu.grad().to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < grad.size(); ++i) worst = std::max(worst, std::fabs(grad_gpu[i] - grad[i]));
    gpu_agrees = on_gpu.output.to_vector<double>() == output && on_gpu.argmax.to_vector<int64_t>() == argmax &&
                 worst < 1e-12;
    std::printf("The CUDA kernels give the same outputs, argmax and gradient: %s\n", gpu_agrees ? "yes" : "NO");
  }
  return agrees && gpu_agrees ? 0 : 1;
}
