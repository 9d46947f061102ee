// roi_align on CUDA against the CPU: every kernel path (the separable forward and backward, the per-sample
// forwards, the shared-memory map and global-atomic backwards, the deterministic sorted terms and gather, the
// RoIs' locality order on large maps, chosen by shape in ops/roi_align/roi_align_cuda.cu), NaN propagation,
// determinism, K = 0 and N = 0, the value check, and the errors found on the GPU.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/deterministic.h"
#include "core/factories.h"
#include "core/transfer_counts.h"
#include "ops/indexing/index_select.h"
#include "ops/roi_align/roi_align.h"
#include "ops/roi_align/roi_align_kernels.h"  // the kernels themselves, for the bit-for-bit cases
#include "ops/shape/cat.h"
#include "ops/sort/sort.h"
#include "tests/ops/roi_align_inputs.h"
#include "tests/support.h"

using namespace minidet;
using minidet::test::max_abs_diff;
using namespace minidet::test::roi_align_inputs;

namespace {

struct CudaCase {
  std::string what;
  Shape input;
  int64_t rois;
  double scale;
  RoIAlignOptions options;
};

// One row per case (clang-format 14 takes only the bare marker).
// clang-format off
std::vector<CudaCase> cuda_cases() {
  using M = RoiPoolMode;
  return {
      {"avg aligned fixed sampling", {2, 8, 12, 13}, 9, 0.5, RoIAlignOptions().set_sampling_ratio(2).set_spatial_scale(0.5)},
      {"avg legacy adaptive", {2, 5, 11, 9}, 7, 1.0, RoIAlignOptions().set_output_size(3, 4).set_aligned(false)},
      {"max aligned fixed", {2, 8, 12, 13}, 9, 0.5,
       RoIAlignOptions().set_sampling_ratio(2).set_spatial_scale(0.5).set_pool_mode(M::Max)},
      {"max legacy adaptive", {3, 6, 10, 10}, 11, 1.0,
       RoIAlignOptions().set_output_size(2).set_aligned(false).set_pool_mode(M::Max)},
      {"40 channels across warps", {2, 40, 25, 34}, 50, 0.25,
       RoIAlignOptions().set_sampling_ratio(2).set_spatial_scale(0.25)},
      // Wider and denser shapes: 300 channels (ten slabs of 32, the last cut short), more than 32 samples per
      // bin, and the 128 channels of the detector's box head.
      {"avg, 5x3 bins of 3x3 samples, 300 channels (two slabs)", {2, 300, 9, 11}, 13, 1.0,
       RoIAlignOptions().set_output_size(5, 3).set_sampling_ratio(3)},
      {"avg, 128 channels, as in the detector", {2, 128, 16, 16}, 40, 0.25,
       RoIAlignOptions().set_sampling_ratio(2).set_spatial_scale(0.25)},
      {"max, 7x7 bins of 6x6 samples", {2, 9, 14, 12}, 10, 0.5,
       RoIAlignOptions().set_sampling_ratio(6).set_spatial_scale(0.5).set_pool_mode(M::Max)},
      {"avg, 7x7 bins of 6x6 samples", {1, 33, 14, 12}, 10, 0.5,
       RoIAlignOptions().set_sampling_ratio(6).set_spatial_scale(0.5)},
      // The average of at most 7x7 bins on a small map takes the separable kernels (roi_align_separable.cuh):
      // in float32 every avg shape above, in float64 the two of 5 and 300 channels and the 40 x 40 map below;
      // the 25 x 34 map (float32) and the 40 x 40 one add their gradient without a map, the others into a
      // map. The other shapes keep the per-sample kernels covered: the staged forward (4 channels per lane up
      // to 128 channels, 8 up to 256) and the warp-per-bin one (more channels, or a float64 stage too large),
      // backward_map_kernel's 1, 2 and 4 channels per lane (max mode, 8x9 bins, and float64 maps), and the
      // global-atomic backward where no map fits (in float32 with float4 atomics, C being a multiple of 4).
      {"avg, 3x3 bins on a 40 x 40 map: the separable backward without a map", {1, 6, 40, 40}, 12, 0.5,
       RoIAlignOptions().set_output_size(3).set_sampling_ratio(2).set_spatial_scale(0.5)},
      {"avg, 8x9 bins (past the separable kernels' 7x7)", {2, 40, 14, 13}, 9, 0.5,
       RoIAlignOptions().set_output_size(8, 9).set_sampling_ratio(2).set_spatial_scale(0.5)},
      {"avg, 8x3 bins, 300 channels: the warp-per-bin forward", {2, 300, 9, 11}, 13, 1.0,
       RoIAlignOptions().set_output_size(8, 3).set_sampling_ratio(2)},
      {"max, 300 channels: the shared-memory backward's 4 channels per lane", {2, 300, 9, 11}, 13, 1.0,
       RoIAlignOptions().set_output_size(5, 3).set_sampling_ratio(3).set_pool_mode(M::Max)},
      {"avg, 200 channels on a 40 x 150 map: the staged forward with 8 channels per lane, a partial slab of "
       "vector atomics", {1, 200, 40, 150}, 10, 0.5, RoIAlignOptions().set_sampling_ratio(2).set_spatial_scale(0.5)},
      {"avg, a map too large for shared memory (the global-atomic backward)", {2, 20, 90, 100}, 30, 0.5,
       RoIAlignOptions().set_sampling_ratio(2).set_spatial_scale(0.5)},
      {"max, a map too large for shared memory", {1, 6, 90, 100}, 20, 0.5,
       RoIAlignOptions().set_sampling_ratio(2).set_spatial_scale(0.5).set_pool_mode(M::Max)},
  };
}
// clang-format on

struct Results {
  Tensor output, grad_input, grad_boxes;
};

Results run_case(const CudaCase& c, const Device& device, DType dtype, uint64_t seed) {
  const Tensor x = random(c.input, dtype, seed).to(device).requires_grad_();
  const RandomRois r = random_rois(c.rois, c.input[0], double(c.input[2]), double(c.input[3]), c.scale, seed + 1, dtype);
  const Tensor boxes = r.boxes.to(device).requires_grad_();
  const Tensor y = roi_align(x, cat({r.batch.to(device), boxes}, 1), c.options);
  y.backward(random(y.sizes(), dtype, seed + 2).to(device));
  return {y.detach().cpu(), x.grad().cpu(), boxes.grad().cpu()};
}

// roi_align's input gradient on `device`, from CPU tensors, back on the CPU.
Tensor input_grad_on(const Device& device, const Tensor& x, const Tensor& rois, const Tensor& upstream,
                     const RoIAlignOptions& options) {
  const Tensor leaf = (device.is_cuda() ? x.cuda() : x.clone()).requires_grad_();
  roi_align(leaf, rois.to(device), options).backward(upstream.to(device));
  return leaf.grad().cpu();
}

}  // namespace

MINIDET_CUDA_TEST_CASE("cuda/roi_align: forward and both gradients match the CPU") {
  for (DType dtype : {kFloat32, kFloat64}) {
    for (bool deterministic : {false, true}) {
      uint64_t seed = 100;
      for (const CudaCase& c : cuda_cases()) {
        CAPTURE(c.what);
        CAPTURE(dtype);
        CAPTURE(deterministic);
        DeterministicGuard mode(deterministic);
        const Results cpu = run_case(c, Device::cpu(), dtype, seed);
        const Results gpu = run_case(c, Device::cuda(), dtype, seed);
        seed += 10;
        const double tol = dtype == kFloat32 ? 1e-4 : 1e-10;
        CHECK(minidet::test::allclose(gpu.output, cpu.output, tol, tol));
        CHECK(minidet::test::allclose(gpu.grad_input, cpu.grad_input, tol, tol));
        // The box gradient sums C * bins * samples terms per RoI: a looser float32 tolerance.
        CHECK(minidet::test::allclose(gpu.grad_boxes, cpu.grad_boxes, dtype == kFloat32 ? 1e-3 : 1e-9,
                                      dtype == kFloat32 ? 1e-3 : 1e-9));
      }
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align: a map of half the L2 cache or more takes its RoIs in locality order") {
  // From half the L2 on, the per-sample forwards and the global-atomic backward take the RoIs sorted by image
  // and centre (roi_nhwc::roi_order). Two images of 256 channels sized from this GPU's L2: the staged forward
  // (avg), the warp-per-bin forward (max) and the global-atomic backward (both), on 300 RoIs in random order.
  int64_t side = 8;
  while (2 * 256 * side * side * int64_t(sizeof(float)) < minidet::test::gpu_l2_bytes() / 2) side += 8;
  uint64_t seed = 900;
  for (RoiPoolMode mode : {RoiPoolMode::Avg, RoiPoolMode::Max}) {
    const CudaCase c{"a large map",
                     {2, 256, side, side},
                     300,
                     0.25,
                     RoIAlignOptions().set_sampling_ratio(2).set_spatial_scale(0.25).set_pool_mode(mode)};
    CAPTURE(side);
    CAPTURE(int(mode));
    const Results cpu = run_case(c, Device::cpu(), kFloat32, seed);
    const Results gpu = run_case(c, Device::cuda(), kFloat32, seed);
    seed += 10;
    CHECK(minidet::test::allclose(gpu.output, cpu.output, 1e-4, 1e-4));
    CHECK(minidet::test::allclose(gpu.grad_input, cpu.grad_input, 1e-4, 1e-4));
    CHECK(minidet::test::allclose(gpu.grad_boxes, cpu.grad_boxes, 1e-3, 1e-3));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align: the shared-memory backward with many RoIs, grouped by image or interleaved") {
  // A detector's box head: 1,200 RoIs of 7x7 bins on four 16 x 16 maps of 128 channels, so each block of
  // the shared-memory kernels takes a chunk of several RoIs: the separable form's in float32, whose warps take
  // a chunk's images one after another; backward_map_kernel's in float64 (its separable scratch would not
  // fit), which merges its map whenever the next RoI is from another image. Grouped by image (as a detector's
  // sampler emits them) a chunk holds one or two images; interleaved (random_rois deals images in turn) it
  // holds all four, and backward_map_kernel merges at every RoI. Both must give the CPU's gradient.
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor x = random({4, 128, 16, 16}, dtype, 90);
    const Tensor interleaved = rois_of(random_rois(1200, 4, 16, 16, 0.0625, 91, dtype));
    const Tensor grouped = index_select(interleaved, 0, argsort(interleaved.select(1, 0).contiguous()));
    const Tensor upstream = random({1200, 128, 7, 7}, dtype, 92);
    const auto options = RoIAlignOptions().set_output_size(7).set_spatial_scale(0.0625).set_sampling_ratio(2);
    for (const Tensor& rois : {grouped, interleaved}) {
      const Tensor cpu = input_grad_on(Device::cpu(), x, rois, upstream, options);
      const Tensor gpu = input_grad_on(Device::cuda(), x, rois, upstream, options);
      REQUIRE(max_abs_diff(cpu, zeros_like(cpu)) > 0);
      // Each element sums some hundreds of terms, in another order on the GPU.
      const double tol = dtype == kFloat32 ? 1e-4 : 1e-11;
      CHECK(minidet::test::allclose(gpu, cpu, tol, tol));
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align: a NaN reaches no more bins or pixels than on the CPU") {
  // The separable kernels multiply whole rows of taps, most of them zero, and NaN * 0 is NaN: they skip the
  // zero taps for a value that is not finite, so that one NaN pixel reaches only the bins whose samples read
  // it, and one NaN bin of dY only the pixels its samples read (the CPU adds zero-weight neighbours too, so
  // its NaNs are a superset). Maps of 16 x 16 (the gradient through the shared-memory map) and 32 x 32
  // (straight to global memory), float32; every finite value must still match.
  struct Map {
    int64_t channels, size;
  };
  for (const Map& m : {Map{128, 16}, Map{64, 32}}) {
    CAPTURE(m.size);
    std::vector<float> input = random({2, m.channels, m.size, m.size}, kFloat32, 95).to_vector<float>();
    input[size_t(((1 * m.channels + 3) * m.size + m.size / 2) * m.size + m.size / 3)] = std::nanf("");
    const Tensor x = from_vector<float>(input, {2, m.channels, m.size, m.size});
    const Tensor rois = rois_of(random_rois(64, 2, double(m.size), double(m.size), 1.0, 96, kFloat32));
    const auto options = RoIAlignOptions().set_output_size(7).set_sampling_ratio(2);
    const Shape out_shape = {64, m.channels, 7, 7};
    std::vector<float> upstream = random(out_shape, kFloat32, 97).to_vector<float>();
    upstream[size_t(((5 * m.channels + 2) * 7 + 3) * 7 + 4)] = std::nanf("");  // RoI 5, channel 2, bin (3, 4)
    const Tensor dy = from_vector<float>(upstream, out_shape);
    // A NaN set on the GPU within the CPU's, not empty, and the finite values close.
    auto check_nans = [](const Tensor& gpu, const Tensor& cpu) {
      const std::vector<float> g = gpu.to_vector<float>(), c = cpu.to_vector<float>();
      size_t gpu_nans = 0, outside = 0, far = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        if (std::isnan(g[i])) {
          ++gpu_nans;
          outside += !std::isnan(c[i]);
        } else if (!std::isnan(c[i]) && std::abs(g[i] - c[i]) > 1e-4 * (1 + std::abs(c[i]))) {
          ++far;
        }
      }
      CHECK(gpu_nans > 0);
      CHECK(outside == 0);
      CHECK(far == 0);
    };
    const Tensor y_cpu = roi_align(x, rois, options), y_gpu = roi_align(x.cuda(), rois.cuda(), options).cpu();
    check_nans(y_gpu, y_cpu);
    check_nans(input_grad_on(Device::cuda(), x, rois, dy, options), input_grad_on(Device::cpu(), x, rois, dy, options));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align: deterministic mode gives identical bits twice") {
  DeterministicGuard deterministic(true);
  for (const CudaCase& c : cuda_cases()) {
    CAPTURE(c.what);
    const Results first = run_case(c, Device::cuda(), kFloat32, 200);
    const Results second = run_case(c, Device::cuda(), kFloat32, 200);
    CHECK(first.output.to_vector<float>() == second.output.to_vector<float>());
    CHECK(first.grad_input.to_vector<float>() == second.grad_input.to_vector<float>());
    CHECK(first.grad_boxes.to_vector<float>() == second.grad_boxes.to_vector<float>());
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align: K = 0 and N = 0 on the GPU") {
  const Tensor x = random({2, 3, 4, 4}, kFloat32, 6).cuda().requires_grad_();
  for (bool deterministic : {false, true}) {
    DeterministicGuard mode(deterministic);
    x.set_grad(Tensor());
    const Tensor y = roi_align(x, zeros({0, 5}, Device::cuda()), RoIAlignOptions().set_output_size(2));
    CHECK(y.sizes() == Shape{0, 3, 2, 2});
    y.backward(zeros_like(y));
    CHECK(x.grad().to_vector<float>() == std::vector<float>(x.numel(), 0.0f));
  }
  const Tensor y0 = roi_align(zeros({0, 3, 4, 4}, Device::cuda()), zeros({0, 5}, Device::cuda()));
  CHECK(y0.sizes() == Shape{0, 3, 7, 7});
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align: check_roi_values off gives the same result with no device-to-host copy") {
  const Tensor x = random({2, 8, 12, 12}, kFloat32, 9).cuda();
  const Tensor rois = rois_from({0, 1, 1, 9, 7, 1, 0.5, 2, 11, 11, 0, 3, 3, 4, 4}).to(kFloat32).cuda();
  const RoIAlignOptions checked = RoIAlignOptions().set_output_size(3).set_sampling_ratio(2);
  const Tensor expected = roi_align(x, rois, checked);
  const TransferCounts before = transfer_counts();
  const Tensor y = roi_align(x, rois, RoIAlignOptions(checked).set_check_roi_values(false));
  CHECK((transfer_counts() - before).device_to_host == 0);  // the check was the forward's only copy
  CHECK(y.to_vector<float>() == expected.to_vector<float>());
  // Shapes, dtypes and devices are still checked.
  CHECK_THROWS_CONTAINING(roi_align(x, rois.narrow(1, 0, 4), RoIAlignOptions().set_check_roi_values(false)),
                          "expected rois of shape (K, 5)");
}

// ---- CUDA: the deterministic input gradient, bit for bit ---------------------------------------------------

namespace {

// `count` rows (batch, x1, y1, x2, y2) over images of image_h x image_w pixels, biased towards the awkward
// cases: every third RoI on the last image, corners anywhere in [-0.5, 1.5] x the image (many boxes hang
// over a border or lie outside), sizes up to the image; every fourth RoI inverted in x (x2 < x1), every fifth
// zero-width, every seventh a point, every sixth inverted in y.
Tensor awkward_rois(int64_t count, int64_t images, double image_h, double image_w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> rows;
  for (int64_t k = 0; k < count; ++k) {
    const double image = k % 3 == 0 ? double(images - 1) : double(rng() % images);
    const double x1 = (unit(rng) * 2 - 0.5) * image_w, y1 = (unit(rng) * 2 - 0.5) * image_h;
    double w = unit(rng) * image_w, h = unit(rng) * image_h;
    if (k % 4 == 3) w = -w;
    if (k % 6 == 5) h = -h;
    if (k % 5 == 4) w = 0;
    if (k % 7 == 6) w = h = 0;
    rows.insert(rows.end(), {image, x1, y1, x1 + w, y1 + h});
  }
  return from_vector<double>(rows, {count, 5});
}

// The input gradient from roi_align's CPU kernel and from its deterministic CUDA kernel, on the same
// upstream gradient. In max mode both use the winners of the CUDA forward: the two forwards round a sum of
// four products differently (the GPU fuses them), so a near-tie between two samples could pick different
// winners, which is the forward's business, not the backward's.
struct InputGrads {
  Tensor cpu, cuda;
};
InputGrads input_grads(const Tensor& x, const Tensor& rois, const Tensor& upstream, const RoIAlignOptions& o) {
  const ops::detail::RoiAlignGeometry g = ops::detail::roi_align_geometry(x, rois, o);
  InputGrads grads{empty(x.sizes(), x.dtype()), empty(x.sizes(), TensorOptions(x.dtype(), Device::cuda()))};
#if MINIDET_WITH_CUDA  // the CUDA kernels exist only in a CUDA build (a CPU build skips the cases that call this)
  const Tensor rois_gpu = rois.cuda(), upstream_gpu = upstream.cuda();
  Tensor argmax;
  if (g.max_mode) {
    const Tensor output = empty(upstream.sizes(), TensorOptions(x.dtype(), Device::cuda()));
    argmax = empty(upstream.sizes(), TensorOptions(kInt64, Device::cuda()));
    ops::detail::roi_align_forward_cuda(x.cuda(), rois_gpu, output, argmax, g);
  }
  ops::detail::roi_align_backward_cpu(upstream, Tensor(), rois, g.max_mode ? argmax.cpu() : Tensor(), grads.cpu,
                                      Tensor(), g);
  ops::detail::roi_align_backward_input_cuda(upstream_gpu, rois_gpu, argmax, grads.cuda, g, true);
  grads.cuda = grads.cuda.cpu();
#endif
  return grads;
}

struct GatherCase {
  std::string what;
  Shape input;
  int64_t rois;
  RoIAlignOptions options;
};

}  // namespace

MINIDET_CUDA_TEST_CASE("cuda/roi_align: deterministic input gradient equals the CPU bit for bit on awkward cases") {
  using M = RoiPoolMode;
  // Channel counts that leave part of a team of lanes idle or that no 16-byte vector divides, maps smaller
  // than one tile and larger than many, several images, RoIs outside, inverted and of zero size, both
  // modes, fixed and adaptive sampling, aligned and legacy boxes. The sorted terms' gather has three team
  // shapes (roi_align_sorted.cuh): one channel a lane (3, 33 and, in float32, 70 channels), short runs (36
  // channels, about 50 terms a pixel, under kLongRun's 64; 70 in float64) and long runs (72 channels, 300 RoIs
  // on a 6 x 7 map: thousands of terms a pixel; also "one pixel", 4 channels), each with a last group of
  // channels only partly filled.
  // The averages with a fixed sampling ratio take the sorted terms (roi_align_sorted.cuh), the rows with
  // adaptive sampling or max mode the tile gather (roi_align_gather.cuh).
  // One row per case (clang-format 14 takes only the bare marker).
  // clang-format off
  const std::vector<GatherCase> cases = {
      {"3 channels, fixed 2", {2, 3, 9, 11}, 40, RoIAlignOptions().set_output_size(3, 2).set_spatial_scale(0.5)
                                                     .set_sampling_ratio(2)},
      {"33 channels, adaptive, legacy", {4, 33, 20, 17}, 150,
       RoIAlignOptions().set_output_size(7).set_spatial_scale(0.5).set_aligned(false)},
      {"33 channels, many tiles, max", {2, 33, 130, 125}, 300,
       RoIAlignOptions().set_output_size(7).set_spatial_scale(0.25).set_sampling_ratio(2).set_pool_mode(M::Max)},
      {"70 channels, adaptive at 1/8", {3, 70, 64, 90}, 250,
       RoIAlignOptions().set_output_size(5, 6).set_spatial_scale(0.125)},
      {"70 channels, fixed 3, legacy, max", {2, 70, 40, 37}, 200,
       RoIAlignOptions().set_output_size(4, 3).set_spatial_scale(0.5).set_sampling_ratio(3).set_aligned(false)
           .set_pool_mode(M::Max)},
      {"a map smaller than a tile, adaptive, max", {3, 7, 5, 3}, 60,
       RoIAlignOptions().set_output_size(2).set_pool_mode(M::Max)},
      {"one pixel, fixed 1", {2, 4, 1, 1}, 20, RoIAlignOptions().set_output_size(2, 3).set_sampling_ratio(1)},
      {"33 channels, fixed 2, legacy", {4, 33, 20, 17}, 150,
       RoIAlignOptions().set_output_size(7).set_spatial_scale(0.5).set_sampling_ratio(2).set_aligned(false)},
      {"70 channels, fixed 3 at 1/8", {3, 70, 64, 90}, 250,
       RoIAlignOptions().set_output_size(5, 6).set_spatial_scale(0.125).set_sampling_ratio(3)},
      {"36 channels, fixed 2 at 1/4: short runs", {3, 36, 30, 21}, 120,
       RoIAlignOptions().set_output_size(7).set_spatial_scale(0.25).set_sampling_ratio(2)},
      {"72 channels, 300 RoIs on a 6 x 7 map: long runs", {2, 72, 6, 7}, 300,
       RoIAlignOptions().set_output_size(7).set_spatial_scale(0.5).set_sampling_ratio(2)},
  };
  // clang-format on
  uint64_t seed = 500;
  for (const GatherCase& c : cases) {
    for (DType dtype : {kFloat32, kFloat64}) {
      CAPTURE(c.what);
      CAPTURE(dtype);
      Generator g(seed++);
      const double scale = c.options.spatial_scale;
      const Tensor x = randn(c.input, dtype, &g);
      const Tensor rois = awkward_rois(c.rois, c.input[0], c.input[2] / scale, c.input[3] / scale, seed++).to(dtype);
      const Tensor upstream = randn({c.rois, c.input[1], c.options.pooled_h, c.options.pooled_w}, dtype, &g);
      const InputGrads grads = input_grads(x, rois, upstream, c.options);
      REQUIRE(max_abs_diff(grads.cpu, zeros_like(grads.cpu)) > 0);  // not vacuous
      CHECK(test::same_bits(grads.cuda, grads.cpu));
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align: deterministic input gradient skips rows naming no image, as the CPU does") {
  // With the value check off nothing stops a batch index of -1 or N; the CPU's backward adds such a row
  // nowhere, and so must both deterministic kernels: the sorted terms (fixed sampling) and the gather.
  for (int64_t sampling : {2, 0}) {
    for (DType dtype : {kFloat32, kFloat64}) {
      CAPTURE(sampling);
      CAPTURE(dtype);
      const Tensor x = random({2, 5, 12, 10}, dtype, 90);
      Tensor rois = awkward_rois(30, 2, 24, 20, 91);
      rois = cat({rois, from_vector<double>({-1, 2, 2, 15, 15, 2, 0, 0, 20, 24}, {2, 5})}, 0).to(dtype);
      const auto options = RoIAlignOptions().set_output_size(3).set_spatial_scale(0.5).set_sampling_ratio(sampling);
      const Tensor upstream = random({32, 5, 3, 3}, dtype, 92);
      const InputGrads grads = input_grads(x, rois, upstream, options);
      REQUIRE(max_abs_diff(grads.cpu, zeros_like(grads.cpu)) > 0);
      CHECK(test::same_bits(grads.cuda, grads.cpu));
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align: deterministic input gradient with K = 0 writes zeros") {
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const RoiPoolMode mode : {RoiPoolMode::Avg, RoiPoolMode::Max}) {
      const Tensor x = random({2, 5, 6, 7}, dtype, 7);
      const auto options = RoIAlignOptions().set_output_size(2).set_pool_mode(mode);
      const InputGrads grads = input_grads(x, zeros({0, 5}, dtype), zeros({0, 5, 2, 2}, dtype), options);
      CHECK(test::same_bits(grads.cuda, zeros_like(x)));
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align: deterministic backward on a detector-sized workload equals the CPU bit for bit") {
  // Through the public op: 500 boxes over two 50 x 68 maps at stride 4 (random_rois: 20% to 90% of the map),
  // so every tile of dx receives from many RoIs; twice, for identical bits from run to run too.
  DeterministicGuard deterministic;
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor x = random({2, 64, 50, 68}, dtype, 80);
    const Tensor rois = rois_of(random_rois(500, 2, 50, 68, 0.25, 81, dtype));
    const Tensor upstream = random({500, 64, 7, 7}, dtype, 82);
    const auto options = RoIAlignOptions().set_output_size(7).set_spatial_scale(0.25).set_sampling_ratio(2);
    const Tensor grads[3] = {input_grad_on(Device::cpu(), x, rois, upstream, options),
                             input_grad_on(Device::cuda(), x, rois, upstream, options),
                             input_grad_on(Device::cuda(), x, rois, upstream, options)};
    REQUIRE(max_abs_diff(grads[0], zeros_like(grads[0])) > 0);
    CHECK(test::same_bits(grads[1], grads[0]));
    CHECK(test::same_bits(grads[2], grads[1]));
  }
}

MINIDET_CUDA_TEST_CASE("errors/roi_align: device mismatch and bad values found on the GPU") {
  const Tensor x = zeros({2, 1, 4, 4}, Device::cuda());
  CHECK_THROWS_CONTAINING(roi_align(x, rois_from({0, 0, 0, 1, 1}).to(kFloat32)), "on the same device");
  CHECK_THROWS_CONTAINING(roi_align(x, rois_from({0, 0, 0, 1, 1, 2, 0, 0, 1, 1}).to(kFloat32).cuda()),
                          "rois row 1");
  CHECK_THROWS_CONTAINING(roi_align(x, rois_from({0, 0, 0, 1, 1, 1, 0, NAN, 1, 1}).to(kFloat32).cuda()),
                          "expected finite coordinates");
  CHECK_THROWS_CONTAINING(roi_align(x, rois_from({0.5, 0, 0, 1, 1}).to(kFloat32).cuda()), "batch index 0.5");
}
