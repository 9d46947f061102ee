// roi_align_rotated on CUDA: the shapes that the channel-last kernels (ops/roi_align/roi_align_nhwc.cuh) and
// the deterministic kernels (ops/roi_align/roi_align_sorted.cuh, roi_align_gather.cuh) handle specially, against the
// CPU, in both backward modes (atomic, and deterministic: the CPU's order, the same bits every run).
//   - channels that are not a multiple of the warp (32) or of a slab (256 = 32 lanes x 8 channels each);
//   - maps smaller than one tile of the gather and larger than many; the small ones take the atomic
//     backward's shared-memory map (ops/roi_align/roi_align_backward.cuh), the large ones its global adds;
//   - RoIs of different images interleaved (the shared-memory map merges at each change of image);
//   - RoIs partly or entirely outside the map (samples in the border band, samples that read 0), zero-size
//     and inverted RoIs;
//   - adaptive sampling (per-RoI grids), legacy (aligned = false) boxes, both angle directions;
//   - RoIs on the last image of a batch (the batch offset into the NHWC copy);
//   - K = 0; a detector-sized workload; float32 and float64 throughout.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/deterministic.h"
#include "core/factories.h"
#include "ops/reduction/reduction.h"
#include "ops/roi_align_rotated/roi_align_rotated.h"
#include "tests/support.h"

using namespace minidet;

namespace {

constexpr double kPi = 3.14159265358979323846;

// `count` rows (batch, cx, cy, w, h, angle) over images of image_h x image_w pixels, biased towards the
// awkward cases: every third RoI on the LAST image; centres anywhere in [-0.5, 1.5] x the image, so many boxes
// hang over a border or lie entirely outside; sizes up to 1.2 x the image; every fourth RoI zero-width and
// every sixth with a negative height.
Tensor awkward_rois(int64_t count, int64_t batch, double image_h, double image_w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> rows;
  for (int64_t k = 0; k < count; ++k) {
    const double image = k % 3 == 0 ? double(batch - 1) : double(rng() % batch);
    const double cx = (unit(rng) * 2 - 0.5) * image_w, cy = (unit(rng) * 2 - 0.5) * image_h;
    const double w = k % 4 == 3 ? 0.0 : unit(rng) * 1.2 * image_w;
    const double h = (k % 6 == 5 ? -1.0 : 1.0) * unit(rng) * 1.2 * image_h;
    rows.insert(rows.end(), {image, cx, cy, w, h, (unit(rng) * 2 - 1) * kPi});
  }
  return from_vector<double>(rows, {count, 6});
}

struct Pass {
  Tensor output, grad;
};

// Forward and input gradient on `device` (deterministic selects the backward), from CPU tensors.
Pass run_on(const Device& device, bool deterministic, const Tensor& x_cpu, const Tensor& rois_cpu,
            const Tensor& upstream_cpu, const RoIAlignRotatedOptions& options) {
  DeterministicGuard mode(deterministic);
  const Tensor x = (device.is_cuda() ? x_cpu.cuda() : x_cpu.clone()).requires_grad_();
  const Tensor y = roi_align_rotated(x, rois_cpu.to(device), options);
  y.backward(upstream_cpu.to(device));
  return {y.detach().cpu(), x.grad().cpu()};
}

}  // namespace

MINIDET_CUDA_TEST_CASE("cuda/roi_align_rotated: channel-last edge shapes match the CPU in both backward modes") {
  struct Case {
    std::string what;
    Shape input;
    int64_t rois;
    RoIAlignRotatedOptions options;
  };
  const std::vector<Case> cases = {
      {"1 channel", {2, 1, 10, 9}, 20, RoIAlignRotatedOptions().set_output_size(3, 2).set_sampling_ratio(2)},
      {"3 channels, fewer than a warp", {2, 3, 11, 12}, 25,
       RoIAlignRotatedOptions().set_output_size(7).set_spatial_scale(0.5).set_sampling_ratio(2)},
      {"33 channels, a warp and one, adaptive", {1, 33, 8, 8}, 12, RoIAlignRotatedOptions().set_output_size(2)},
      {"257 channels, a second slab of one channel", {2, 257, 6, 7}, 6,
       RoIAlignRotatedOptions().set_output_size(3, 2).set_sampling_ratio(1).set_aligned(false).set_clockwise(true)},
      {"rois on the last of 7 images", {7, 5, 9, 9}, 30,
       RoIAlignRotatedOptions().set_output_size(4).set_sampling_ratio(3)},
      {"adaptive at scale 1/8, large grids", {2, 40, 12, 10}, 30,
       RoIAlignRotatedOptions().set_output_size(5, 3).set_spatial_scale(0.125).set_sampling_ratio(0)},
      {"70 channels on maps of many tiles", {2, 70, 70, 90}, 120,
       RoIAlignRotatedOptions().set_output_size(7).set_spatial_scale(0.25).set_sampling_ratio(2)},
      {"33 channels, legacy adaptive, clockwise, many tiles", {3, 33, 50, 41}, 100,
       RoIAlignRotatedOptions().set_output_size(4, 6).set_spatial_scale(0.5).set_aligned(false).set_clockwise(true)},
      {"one pixel", {2, 5, 1, 1}, 20, RoIAlignRotatedOptions().set_output_size(2).set_sampling_ratio(1)},
  };
  uint64_t seed = 300;
  for (const Case& c : cases) {
    for (DType dtype : {kFloat32, kFloat64}) {
      CAPTURE(c.what);
      CAPTURE(dtype);
      Generator g(seed++);
      const double s = c.options.spatial_scale;
      const Tensor x = randn(c.input, dtype, &g);
      const Tensor rois = awkward_rois(c.rois, c.input[0], c.input[2] / s, c.input[3] / s, seed++).to(dtype);
      const Tensor upstream = randn({c.rois, c.input[1], c.options.pooled_h, c.options.pooled_w}, dtype, &g);
      const Pass cpu = run_on(Device::cpu(), false, x, rois, upstream, c.options);
      REQUIRE(test::max_abs_diff(cpu.grad, zeros_like(cpu.grad)) > 0);  // not vacuous
      // Sample positions may differ in the last bit (sin/cos, roi_align_rotated_kernels.h), the forward's
      // sums of products round differently (the GPU fuses them) and the atomics add in any order.
      const double tolerance = dtype == kFloat32 ? 1e-4 : 1e-10;
      const Pass atomic = run_on(Device::cuda(), false, x, rois, upstream, c.options);
      CHECK(test::allclose(atomic.output, cpu.output, tolerance, tolerance));
      CHECK(test::allclose(atomic.grad, cpu.grad, tolerance, tolerance));
      // The gather adds every term in the CPU's order with the CPU's arithmetic: the CPU's result up to the
      // devices' sin and cos, and the same bits every run.
      const Pass gather = run_on(Device::cuda(), true, x, rois, upstream, c.options);
      const Pass again = run_on(Device::cuda(), true, x, rois, upstream, c.options);
      CHECK(test::allclose(gather.grad, cpu.grad, tolerance, tolerance));
      CHECK(test::same_bits(again.grad, gather.grad));
      CHECK(test::max_abs_diff(gather.output, atomic.output) == 0);  // the forward does not depend on the mode
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align_rotated: K equal to 0 and rois entirely outside in both backward modes") {
  for (DType dtype : {kFloat32, kFloat64}) {
    for (bool deterministic : {false, true}) {
      CAPTURE(dtype);
      CAPTURE(deterministic);
      Generator g(400);
      const Tensor x = randn({2, 35, 6, 5}, dtype, &g);
      const auto options = RoIAlignRotatedOptions().set_output_size(2, 3);
      const Pass none = run_on(Device::cuda(), deterministic, x, zeros({0, 6}, dtype), zeros({0, 35, 2, 3}, dtype),
                               options);
      CHECK(none.output.sizes() == Shape{0, 35, 2, 3});
      CHECK(test::max_abs_diff(none.grad, zeros_like(x)) == 0);
      // Far past the right border, and far above the map: every sample reads 0 and gets no gradient.
      const Tensor outside = from_vector<double>({1, 40, 3, 4, 2, 0.7, 0, 2, -30, 6, 3, -2.0}, {2, 6}).to(dtype);
      const Pass far = run_on(Device::cuda(), deterministic, x, outside, randn({2, 35, 2, 3}, dtype, &g), options);
      CHECK(test::max_abs_diff(far.output, zeros_like(far.output)) == 0);
      CHECK(test::max_abs_diff(far.grad, zeros_like(x)) == 0);
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align_rotated: deterministic backward on a detector-sized workload, the same bits twice") {
  // 500 rotated boxes, many overlapping, over two 50 x 68 maps at stride 4: the CPU's result (up to the
  // devices' sin and cos) and identical bits from run to run.
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    Generator g(410);
    const Tensor x = randn({2, 64, 50, 68}, dtype, &g);
    const Tensor rois = awkward_rois(500, 2, 200, 272, 411).to(dtype);
    const Tensor upstream = randn({500, 64, 7, 7}, dtype, &g);
    const auto options = RoIAlignRotatedOptions().set_output_size(7).set_spatial_scale(0.25).set_sampling_ratio(2);
    const Pass cpu = run_on(Device::cpu(), false, x, rois, upstream, options);
    const Pass first = run_on(Device::cuda(), true, x, rois, upstream, options);
    const Pass second = run_on(Device::cuda(), true, x, rois, upstream, options);
    REQUIRE(test::max_abs_diff(cpu.grad, zeros_like(cpu.grad)) > 0);
    const double tolerance = dtype == kFloat32 ? 1e-4 : 1e-10;
    CHECK(test::allclose(first.grad, cpu.grad, tolerance, tolerance));
    CHECK(test::same_bits(second.grad, first.grad));
  }
}
