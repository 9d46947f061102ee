// roi_pool: hand-computed bins, argmax and gradient routing; the empty-bin, tie and NaN rules; float64
// gradient checks; CUDA parity (forward, argmax, gradient) and deterministic bits; every bad input.
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "ops/roi_pool/roi_pool.h"
#include "ops/shape/cat.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {

// Distinct values 0.1 apart in random order: no two pixels of a bin tie, and a finite-difference step of
// 1e-6 never changes a bin's argmax.
Tensor distinct(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randperm(shape_numel(shape), kInt64, &g).to(kFloat64).view(shape) * 0.1;
}

// `count` RoIs (batch, x1, y1, x2, y2) in image pixels over `batch` images of image_h x image_w pixels.
// Corners range past every border (some RoIs stick out or lie outside), sizes from a fraction of a pixel
// to most of the image, and every fifth RoI is inverted (x2 < x1) to exercise the empty-bin rule.
Tensor random_rois(int64_t count, int64_t batch, double image_h, double image_w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> values;
  for (int64_t k = 0; k < count; ++k) {
    const double x1 = (unit(rng) * 1.2 - 0.2) * image_w, y1 = (unit(rng) * 1.2 - 0.2) * image_h;
    double w = unit(rng) * 0.8 * image_w, h = unit(rng) * 0.8 * image_h;
    if (k % 5 == 4) w = -w - 1.5;  // inverted: x2 + 1 < x1
    values.insert(values.end(), {double(rng() % batch), x1, y1, x1 + w, y1 + h});
  }
  return from_vector<double>(values, {count, 5});
}

}  // namespace

TEST_CASE("values/roi_pool: whole-map RoI at scale 1 picks each quadrant's maximum") {
  const Tensor x = arange(0, 16, 1, kFloat64).view({1, 1, 4, 4});  // x[h, w] = 4h + w
  const Tensor rois = from_vector<double>({0, 0, 0, 3, 3}, {1, 5});
  // X1 = 0, X2 = (3 + 1) * 1 = 4: bins of 2 pixels, rows and columns [0, 2) and [2, 4).
  const RoIPoolResult r = roi_pool_with_argmax(x, rois, {2, 2}, 1.0);
  CHECK(r.output.sizes() == Shape{1, 1, 2, 2});
  CHECK(r.output.to_vector<double>() == std::vector<double>{5, 7, 13, 15});
  CHECK(r.argmax.to_vector<int64_t>() == std::vector<int64_t>{5, 7, 13, 15});
  CHECK(r.argmax.dtype() == kInt64);
}

TEST_CASE("values/roi_pool: fractional box at scale 0.5 has overlapping bins and no rounding") {
  // RoI (1, 1, 4, 6) at s = 0.5: X1 = 0.5, X2 = 2.5, Y1 = 0.5, Y2 = 3.5. bin_w = 1, bin_h = 1.5.
  //   columns: q = 0 [floor(0.5), ceil(1.5)) = [0, 2);  q = 1 [floor(1.5), ceil(2.5)) = [1, 3)   (overlap at 1)
  //   rows:    p = 0 [floor(0.5), ceil(2.0)) = [0, 2);  p = 1 [floor(2.0), ceil(3.5)) = [2, 4)
  // Rounding the box first (torchvision) would give other bins; here only the bins are floored/ceiled.
  const Tensor x = from_vector<double>({0, 9, 0, 0,  //
                                       1, 2, 3, 0,  //
                                       4, 0, 0, 8,  //
                                       0, 7, 5, 6},
                                      {1, 1, 4, 4})
                       .requires_grad_();
  const Tensor rois = from_vector<double>({0, 1, 1, 4, 6}, {1, 5});
  const RoIPoolResult r = roi_pool_with_argmax(x, rois, {2, 2}, 0.5);
  // (0,0): rows 0-1 cols 0-1 -> 9 at 1;  (0,1): rows 0-1 cols 1-2 -> 9 at 1 (shared pixel)
  // (1,0): rows 2-3 cols 0-1 -> 7 at 13;  (1,1): rows 2-3 cols 1-2 -> 7 at 13 (column 3's 8 is outside)
  CHECK(r.output.to_vector<double>() == std::vector<double>{9, 9, 7, 7});
  CHECK(r.argmax.to_vector<int64_t>() == std::vector<int64_t>{1, 1, 13, 13});
  // Both bins that chose pixel 1 send their gradient there, and they add up.
  r.output.backward(from_vector<double>({0.5, 0.25, 2, 3}, {1, 1, 2, 2}));
  std::vector<double> expected(16, 0.0);
  expected[1] = 0.75;
  expected[13] = 5;
  CHECK(x.grad().to_vector<double>() == expected);
}

TEST_CASE("values/roi_pool: ties go to the first maximum in row-major order and NaN wins its bin") {
  const Tensor x = full({1, 1, 3, 3}, 2.0, kFloat64);
  const Tensor rois = from_vector<double>({0, 0, 0, 2, 2}, {1, 5});
  // One bin covering the whole map, all values equal: the first pixel (0, 0) is the argmax.
  CHECK(roi_pool_with_argmax(x, rois, {1, 1}, 1.0).argmax.to_vector<int64_t>() == std::vector<int64_t>{0});
  // 2x2 output on 3 pixels: bins [0, 2) and [1, 3) (bin size 1.5); each bin's first pixel wins.
  CHECK(roi_pool_with_argmax(x, rois, {2, 2}, 1.0).argmax.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 3, 4});
  const double nan = std::nan("");
  const Tensor with_nan = from_vector<double>({1, nan, 5, 3, 4, nan, 0, 0, 0}, {1, 1, 3, 3});
  const RoIPoolResult r = roi_pool_with_argmax(with_nan, rois, {1, 1}, 1.0);
  CHECK(std::isnan(r.output.item<double>()));
  CHECK(r.argmax.item<int64_t>() == 1);  // the first NaN
}

TEST_CASE("values/roi_pool: empty bins give 0 and argmax -1 and send no gradient") {
  // Negative values, so an empty bin's 0 cannot be mistaken for a maximum.
  const Tensor x = (arange(0, 16, 1, kFloat64).view({1, 1, 4, 4}) * -1.0).detach().requires_grad_();
  const Tensor rois = from_vector<double>({0, 2, 2, 5, 5,     // partly outside: bin (0, 0) rows/cols [2, 4)
                                           0, 3, 0, 1, 3,     // inverted: x2 + 1 = 2 < x1 = 3
                                           0, 10, 10, 12, 12, // fully outside the map
                                           0, -3, -3, -1, -1, // fully outside on the negative side
                                           0, 1, 1, 1, 1},    // x1 == x2: one pixel wide (the +1), not empty
                                          {5, 5});
  const RoIPoolResult r = roi_pool_with_argmax(x, rois, {2, 2}, 1.0);
  const std::vector<double> out = r.output.to_vector<double>();
  const std::vector<int64_t> arg = r.argmax.to_vector<int64_t>();
  CHECK(std::vector<double>(out.begin(), out.begin() + 4) == std::vector<double>{-10, 0, 0, 0});
  CHECK(std::vector<int64_t>(arg.begin(), arg.begin() + 4) == std::vector<int64_t>{10, -1, -1, -1});
  for (int i = 4; i < 16; ++i) {
    CAPTURE(i);
    CHECK(out[i] == 0.0);
    CHECK(arg[i] == -1);
  }
  // The one-pixel RoI: every bin is pixel (1, 1) = flat 5.
  CHECK(std::vector<double>(out.begin() + 16, out.end()) == std::vector<double>(4, -5.0));
  CHECK(std::vector<int64_t>(arg.begin() + 16, arg.end()) == std::vector<int64_t>(4, 5));
  Generator g(3);
  const Tensor upstream = randn(r.output.sizes(), kFloat64, &g);
  r.output.backward(upstream);
  const std::vector<double> up = upstream.to_vector<double>(), grad = x.grad().to_vector<double>();
  std::vector<double> expected(16, 0.0);
  expected[10] = up[0];
  expected[5] = up[16] + up[17] + up[18] + up[19];
  CHECK(grad == expected);
}

TEST_CASE("values/roi_pool: rois get a zero gradient and K or N equal to 0 give empty results") {
  const Tensor x = distinct({2, 3, 5, 5}, 1).requires_grad_();
  const Tensor rois = from_vector<double>({1, 0.3, 0.6, 3.2, 2.7}, {1, 5}).requires_grad_();
  sum(roi_pool(x, rois, {2, 3}, 1.0)).backward();
  CHECK(rois.grad().to_vector<double>() == std::vector<double>(5, 0.0));
  CHECK(sum(x.grad()).item<double>() != 0.0);

  x.set_grad(Tensor());
  const Tensor none = zeros({0, 5}, kFloat64);
  const Tensor y = roi_pool(x, none, {2, 3}, 1.0);
  CHECK(y.sizes() == Shape{0, 3, 2, 3});
  sum(y).backward();
  CHECK(x.grad().sizes() == x.sizes());
  CHECK(x.grad().to_vector<double>() == std::vector<double>(x.numel(), 0.0));

  const Tensor no_images = zeros({0, 3, 5, 5}, kFloat64).requires_grad_();
  const Tensor empty_out = roi_pool(no_images, none, {7, 7}, 0.25);
  CHECK(empty_out.sizes() == Shape{0, 3, 7, 7});
  sum(empty_out).backward();
  CHECK(no_images.grad().sizes() == Shape{0, 3, 5, 5});
}

TEST_CASE("values/roi_pool: check_roi_values off skips only the value check") {
  const Tensor x = distinct({2, 3, 9, 11}, 3);
  const Tensor rois = from_vector<double>({0, 0.3, 0.6, 13.2, 9.7, 1, 4.0, 2.5, 20.0, 16.0}, {2, 5});
  const RoIPoolResult checked = roi_pool_with_argmax(x, rois, {3, 2}, 0.5);
  const RoIPoolResult unchecked = roi_pool_with_argmax(x, rois, {3, 2}, 0.5, /*check_roi_values=*/false);
  CHECK(unchecked.output.to_vector<double>() == checked.output.to_vector<double>());
  CHECK(unchecked.argmax.to_vector<int64_t>() == checked.argmax.to_vector<int64_t>());
  // The shape checks still run; only the rows' values go unchecked.
  CHECK_THROWS_CONTAINING(roi_pool(x, zeros({2, 4}, kFloat64), {3, 2}, 0.5, false), "roi_pool");
  CHECK_THROWS_CONTAINING(roi_pool(x, from_vector<double>({2, 0, 0, 1, 1}, {1, 5}), {3, 2}, 0.5), "rois row 0");
  // A batch index of 0.5 is refused by the value check; unchecked, the kernel truncates it to image 0.
  const Tensor half_index = from_vector<double>({0.5, 0.3, 0.6, 13.2, 9.7}, {1, 5});
  CHECK_THROWS_CONTAINING(roi_pool(x, half_index, {3, 2}, 0.5), "rois row 0");
  const std::vector<double> both_rows = checked.output.to_vector<double>();  // row 0 first: 3 channels x 3 x 2
  const std::vector<double> first_row(both_rows.begin(), both_rows.begin() + 3 * 3 * 2);
  CHECK(roi_pool(x, half_index, {3, 2}, 0.5, false).to_vector<double>() == first_row);
}

TEST_CASE("gradcheck/roi_pool: fractional RoIs on two images at several scales in float64") {
  struct Case {
    std::string what;
    Shape input;
    int64_t rois;
    std::array<int64_t, 2> output;
    double scale;
  };
  const std::vector<Case> cases = {
      {"scale 1 output 2x2", {2, 2, 6, 7}, 4, {2, 2}, 1.0},
      {"scale 0.5 output 3x2", {2, 3, 5, 6}, 6, {3, 2}, 0.5},
      {"scale 0.25 output 1x3", {1, 2, 4, 8}, 3, {1, 3}, 0.25},
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const Tensor x = distinct(c.input, seed++).requires_grad_();
    const Tensor rois =
        random_rois(c.rois, c.input[0], double(c.input[2]) / c.scale, double(c.input[3]) / c.scale, seed++);
    const auto fn = [&](const TensorList& in) { return roi_pool(in[0], rois, c.output, c.scale); };
    const auto result = autograd::gradcheck(fn, {x});
    MESSAGE("roi_pool " << c.what << ": max_abs_error " << result.max_abs_error);
    CHECK_MESSAGE(result.ok, result.report);
  }
}

TEST_CASE("gradcheck/roi_pool: non-contiguous input") {
  const Tensor base = distinct({2, 6, 5, 3}, 30);  // an NHWC buffer read as NCHW
  const Tensor x = base.permute({0, 3, 1, 2}).requires_grad_();
  REQUIRE_FALSE(x.is_contiguous());
  const Tensor rois = random_rois(5, 2, 6, 5, 31);
  const auto result =
      autograd::gradcheck([&](const TensorList& in) { return roi_pool(in[0], rois, {2, 2}, 1.0); }, {x});
  MESSAGE("roi_pool non-contiguous: max_abs_error " << result.max_abs_error);
  CHECK_MESSAGE(result.ok, result.report);
}

namespace {

// One roi_pool forward and backward, on the GPU when on_cuda: {output, argmax, dx}, all on the CPU.
std::vector<Tensor> pool_and_backward(const Tensor& x_cpu, const Tensor& rois_cpu, const Tensor& upstream,
                                      std::array<int64_t, 2> output_size, double scale, bool on_cuda) {
  const Tensor x = (on_cuda ? x_cpu.cuda() : x_cpu.clone()).requires_grad_();
  const RoIPoolResult r = roi_pool_with_argmax(x, on_cuda ? rois_cpu.cuda() : rois_cpu, output_size, scale);
  r.output.backward(on_cuda ? upstream.cuda() : upstream);
  return {r.output.detach().cpu(), r.argmax.cpu(), x.grad().cpu()};
}

// Channel counts that leave part of a warp idle, maps small enough for the deterministic backward's sorted
// buckets and large enough for its sorted terms, several images, RoIs that stick out or lie outside
// (random_rois).
struct ParityCase {
  Shape input;
  int64_t rois;
  std::array<int64_t, 2> output;
  double scale;
};
const std::vector<ParityCase> kParityCases = {{{2, 3, 9, 11}, 40, {3, 2}, 0.5},
                                              {{4, 33, 20, 17}, 150, {7, 7}, 0.5},
                                              {{2, 33, 130, 125}, 300, {7, 7}, 0.25},
                                              {{3, 70, 64, 90}, 250, {5, 6}, 0.125}};

}  // namespace

MINIDET_CUDA_TEST_CASE("cuda/roi_pool: forward argmax and gradient match the CPU") {
  // The last case is the benchmark's shape family, small enough for a test.
  const std::vector<ParityCase> cases = {{{2, 3, 9, 11}, 12, {3, 2}, 0.5},
                                         {{1, 4, 16, 16}, 7, {7, 7}, 1.0},
                                         {{3, 32, 25, 34}, 200, {7, 7}, 0.25}};
  uint64_t seed = 40;
  for (const ParityCase& c : cases) {
    for (DType dtype : {kFloat32, kFloat64}) {
      CAPTURE(dtype);
      CAPTURE(c.input[1]);
      Generator g(seed++);
      // randn values in float32 have ties only by accident; the tie rule is the same on both devices anyway.
      const Tensor x_cpu = randn(c.input, dtype, &g);
      const Tensor rois_cpu =
          random_rois(c.rois, c.input[0], c.input[2] / c.scale, c.input[3] / c.scale, seed++).to(dtype);
      const Tensor upstream = randn({c.rois, c.input[1], c.output[0], c.output[1]}, dtype, &g);
      const std::vector<Tensor> results[2] = {pool_and_backward(x_cpu, rois_cpu, upstream, c.output, c.scale, false),
                                              pool_and_backward(x_cpu, rois_cpu, upstream, c.output, c.scale, true)};
      // Same bins (roi_pool_bin uses an explicit fma) and the same tie rule: identical maxima and argmax.
      CHECK(results[1][0].to_vector<double>() == results[0][0].to_vector<double>());
      CHECK(results[1][1].to_vector<int64_t>() == results[0][1].to_vector<int64_t>());
      // The atomic scatter adds in another order: equal up to float32 rounding of a few terms.
      CHECK(minidet::test::allclose(results[1][2], results[0][2], 1e-5, 1e-5));
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_pool: deterministic backward gives identical bits twice and equals the CPU") {
  DeterministicGuard deterministic;
  Generator g(50);
  // Few pixels, many overlapping RoIs and channels: many bins pick the same pixel.
  const Tensor x_cpu = randn({2, 16, 12, 13}, kFloat32, &g);
  const Tensor rois_cpu = random_rois(300, 2, 24, 26, 51).to(kFloat32);
  const Tensor upstream = randn({300, 16, 3, 3}, kFloat32, &g);
  const Tensor x_cpu_leaf = x_cpu.clone().requires_grad_();
  roi_pool(x_cpu_leaf, rois_cpu, {3, 3}, 0.5).backward(upstream);
  const std::vector<float> on_cpu = x_cpu_leaf.grad().to_vector<float>();
  const Tensor x = x_cpu.cuda().requires_grad_();
  std::vector<float> first;
  for (int round = 0; round < 2; ++round) {
    x.set_grad(Tensor());
    roi_pool(x, rois_cpu.cuda(), {3, 3}, 0.5).backward(upstream.cuda());
    const std::vector<float> grad = x.grad().to_vector<float>();
    if (round == 0) first = grad;
    else CHECK(grad == first);
  }
  // The deterministic backward adds in the CPU's order (k, p, q) with plain IEEE additions: the CPU's bits.
  CHECK(first == on_cpu);
}


MINIDET_CUDA_TEST_CASE("cuda/roi_pool: both backwards match the CPU for odd channel counts and tile sizes") {
  uint64_t seed = 60;
  for (const ParityCase& c : kParityCases) {
    for (DType dtype : {kFloat32, kFloat64}) {
      for (bool deterministic : {false, true}) {
        CAPTURE(c.input[1]);
        CAPTURE(dtype);
        CAPTURE(deterministic);
        DeterministicGuard mode(deterministic);
        Generator g(seed++);
        const Tensor x = randn(c.input, dtype, &g);
        const Tensor rois =
            random_rois(c.rois, c.input[0], c.input[2] / c.scale, c.input[3] / c.scale, seed++).to(dtype);
        const Tensor upstream = randn({c.rois, c.input[1], c.output[0], c.output[1]}, dtype, &g);
        const std::vector<Tensor> cpu = pool_and_backward(x, rois, upstream, c.output, c.scale, false);
        const std::vector<Tensor> gpu = pool_and_backward(x, rois, upstream, c.output, c.scale, true);
        CHECK(gpu[0].to_vector<double>() == cpu[0].to_vector<double>());
        CHECK(gpu[1].to_vector<int64_t>() == cpu[1].to_vector<int64_t>());
        // The deterministic backward adds in the CPU's order: equal bits. The atomics add in any order.
        if (deterministic) CHECK(gpu[2].to_vector<double>() == cpu[2].to_vector<double>());
        else CHECK(minidet::test::allclose(gpu[2], cpu[2], 1e-5, 1e-5));
      }
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_pool: ties and NaN pick the CPU's pixel on small and large maps") {
  // Values from {0, 1, 2}: most bins hold several maxima, and the first in row-major order must win on both
  // devices. A few NaN pixels win their bins. Overlapping bins (fractional boxes) share maxima.
  for (const Shape& shape : {Shape{2, 35, 12, 14}, Shape{2, 40, 120, 130}}) {
    for (DType dtype : {kFloat32, kFloat64}) {
      CAPTURE(shape[2]);
      CAPTURE(dtype);
      Generator g(70);
      const Tensor levels = randint(0, 3, shape, kInt64, &g).to(kFloat64);
      std::vector<double> values = levels.to_vector<double>();
      for (size_t i = 0; i < values.size(); i += 997) values[i] = std::nan("");
      const Tensor x = from_vector<double>(values, shape).to(dtype);
      const Tensor rois = random_rois(200, shape[0], shape[2] * 2.0, shape[3] * 2.0, 71).to(dtype);
      const Tensor upstream = randn({200, shape[1], 4, 3}, dtype, &g);
      for (bool deterministic : {false, true}) {
        CAPTURE(deterministic);
        DeterministicGuard mode(deterministic);
        const std::vector<Tensor> cpu = pool_and_backward(x, rois, upstream, {4, 3}, 0.5, false);
        const std::vector<Tensor> gpu = pool_and_backward(x, rois, upstream, {4, 3}, 0.5, true);
        CHECK(gpu[1].to_vector<int64_t>() == cpu[1].to_vector<int64_t>());
        const std::vector<double> a = gpu[0].to_vector<double>(), b = cpu[0].to_vector<double>();
        bool same = a.size() == b.size();
        for (size_t i = 0; same && i < a.size(); ++i) same = (a[i] == b[i]) || (std::isnan(a[i]) && std::isnan(b[i]));
        CHECK(same);
        if (deterministic) CHECK(gpu[2].to_vector<double>() == cpu[2].to_vector<double>());
      }
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_pool: deterministic backward on a detector-sized workload equals the CPU bit for bit") {
  DeterministicGuard deterministic;
  for (DType dtype : {kFloat64, kFloat32}) {
    CAPTURE(dtype);
    Generator g(80);
    const Shape shape = {2, 64, 50, 68};
    const Tensor x = randn(shape, dtype, &g);
    // Many RoIs per tile: 500 boxes over two 50 x 68 maps at stride 4.
    const Tensor rois = random_rois(500, 2, 200, 272, 81).to(dtype);
    const Tensor upstream = randn({500, 64, 7, 7}, dtype, &g);
    const std::vector<Tensor> cpu = pool_and_backward(x, rois, upstream, {7, 7}, 0.25, false);
    const std::vector<Tensor> first = pool_and_backward(x, rois, upstream, {7, 7}, 0.25, true);
    const std::vector<Tensor> second = pool_and_backward(x, rois, upstream, {7, 7}, 0.25, true);
    CHECK(first[2].to_vector<double>() == second[2].to_vector<double>());
    CHECK(first[2].to_vector<double>() == cpu[2].to_vector<double>());
    CHECK(sum(first[2]).item<double>() != 0.0);
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_pool: both deterministic backwards equal the CPU bit for bit") {
  // roi_pool_deterministic_cuda.cu: planes of 40 x 30 take the sorted buckets (several chunks of bins per
  // plane), 40 x 40 the sorted buckets in float32 (1,100 RoIs on one image: two pieces of the RoI list) and
  // the sorted terms in float64, whose plane arrays take more shared memory; 30 x 40 the sorted buckets with
  // two pieces in both; 150 x 200 the sorted terms. 34 x 48 and 34 x 35 (float32 and float64) ask for 48 KB
  // of dynamic shared memory or a few bytes less, which with the kernel's static arrays passes the default
  // limit, so they fail unless the kernel is opted in. 10 x 10 planes on one image take the largest chunks (4,096 bins
  // in float32, 2,048 in float64) and 200 RoIs fill several of them, every warp's quarter included.
  struct Case {
    Shape shape;
    int64_t rois;
  };
  DeterministicGuard deterministic;
  uint64_t seed = 110;
  for (const Case& c :
       {Case{{3, 5, 40, 30}, 400}, Case{{1, 3, 40, 40}, 1100}, Case{{1, 3, 30, 40}, 1100}, Case{{2, 3, 34, 48}, 200},
        Case{{2, 3, 34, 35}, 200}, Case{{2, 3, 150, 200}, 300}, Case{{1, 3, 10, 10}, 200}}) {
    for (DType dtype : {kFloat32, kFloat64}) {
      CAPTURE(c.shape[2]);
      CAPTURE(dtype);
      Generator g(seed++);
      const Tensor x = randn(c.shape, dtype, &g);
      const Tensor rois = random_rois(c.rois, c.shape[0], double(c.shape[2]), double(c.shape[3]), seed++).to(dtype);
      const Tensor upstream = randn({c.rois, c.shape[1], 7, 7}, dtype, &g);
      const std::vector<Tensor> cpu = pool_and_backward(x, rois, upstream, {7, 7}, 1.0, false);
      const std::vector<Tensor> first = pool_and_backward(x, rois, upstream, {7, 7}, 1.0, true);
      const std::vector<Tensor> second = pool_and_backward(x, rois, upstream, {7, 7}, 1.0, true);
      CHECK(first[2].to_vector<double>() == second[2].to_vector<double>());
      CHECK(first[2].to_vector<double>() == cpu[2].to_vector<double>());
    }
  }
  // The sorted terms group the RoIs by image: images 0 and 3 have none, and the RoIs of images 1, 2 and 4
  // come interleaved. Planes of 2^15 pixels need all 16 bits of the pixel field for the empty bins' `none`.
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    Generator g(130);
    const Shape shape = {5, 3, 128, 256};
    const Tensor x = randn(shape, dtype, &g);
    std::vector<double> rows = random_rois(240, 3, 128, 256, 131).to_vector<double>();
    for (size_t r = 0; r < rows.size(); r += 5) rows[r] = rows[r] == 0 ? 1 : rows[r] == 1 ? 2 : 4;
    const Tensor rois = from_vector<double>(rows, {240, 5}).to(dtype);
    const Tensor upstream = randn({240, shape[1], 7, 7}, dtype, &g);
    const std::vector<Tensor> cpu = pool_and_backward(x, rois, upstream, {7, 7}, 1.0, false);
    const std::vector<Tensor> gpu = pool_and_backward(x, rois, upstream, {7, 7}, 1.0, true);
    CHECK(gpu[2].to_vector<double>() == cpu[2].to_vector<double>());
  }
  // With the value check off, a row whose batch index names no image sends nothing back: on an input larger
  // than L2 (106 MB) the plane forward leaves its bins empty, and the sorted buckets skip it.
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    Generator g(120);
    const Shape shape = {2, dtype == kFloat32 ? 13000 : 6500, 32, 32};
    const Tensor x = randn(shape, dtype, &g);
    const Tensor rois = random_rois(60, 2, 32, 32, 121).to(dtype);
    const Tensor upstream = randn({61, shape[1], 2, 2}, dtype, &g);
    const std::vector<Tensor> cpu = pool_and_backward(x, rois, upstream.slice(0, 0, 60), {2, 2}, 1.0, false);
    const Tensor stray = from_vector<double>({7, 0, 0, 10, 10}, {1, 5}).to(dtype);
    const Tensor x_gpu = x.cuda().requires_grad_();
    roi_pool_with_argmax(x_gpu, cat({rois, stray}, 0).cuda(), {2, 2}, 1.0, false).output.backward(upstream.cuda());
    CHECK(x_gpu.grad().to_vector<double>() == cpu[2].to_vector<double>());
  }
}

MINIDET_CUDA_TEST_CASE(
    "cuda/roi_pool: an input larger than the L2 cache takes the tile forward and the plane backward") {
  // 160 MB of float32 input (more than any current GPU's L2) in planes of 200 x 250 that fit a block's shared
  // memory: the forward over tiles (roi_pool_tiles_cuda.cu) and the plane backward (roi_pool_cuda.cu). 1,100 small RoIs
  // over two images (two pieces of the RoI list per block), a few large ones that reach or cross the map's edges, and,
  // with the value check off, a row whose batch index names no image: its bins must come out empty (0, argmax -1) and
  // send nothing back.
  Generator g(90);
  const Shape shape = {2, 400, 200, 250};
  const Tensor x = randn(shape, kFloat32, &g);
  const Tensor small = random_rois(1100, 2, 20, 25, 91).to(kFloat32);
  const Tensor large = from_vector<float>({0, 0, 0, 249, 199, 1, 100, 50, 290, 260, 1, -30, 120, 60, 240}, {3, 5});
  const Tensor rois = cat({small, large}, 0);
  const int64_t k = rois.size(0);
  const Tensor upstream = randn({k + 1, shape[1], 3, 3}, kFloat32, &g);
  const std::vector<Tensor> cpu = pool_and_backward(x, rois, upstream.slice(0, 0, k), {3, 3}, 1.0, false);
  const Tensor stray = from_vector<float>({7, 0, 0, 10, 10}, {1, 5});
  const Tensor x_gpu = x.cuda().requires_grad_();
  const RoIPoolResult r = roi_pool_with_argmax(x_gpu, cat({rois, stray}, 0).cuda(), {3, 3}, 1.0, false);
  r.output.backward(upstream.cuda());
  const Tensor output = r.output.detach().cpu(), argmax = r.argmax.cpu();
  CHECK(output.slice(0, 0, k).to_vector<float>() == cpu[0].to_vector<float>());
  CHECK(argmax.slice(0, 0, k).to_vector<int64_t>() == cpu[1].to_vector<int64_t>());
  CHECK(output.slice(0, k, k + 1).to_vector<float>() == std::vector<float>(shape[1] * 9, 0.0f));
  CHECK(argmax.slice(0, k, k + 1).to_vector<int64_t>() == std::vector<int64_t>(shape[1] * 9, -1));
  // The shared-memory atomics add in any order: equal up to float32 rounding.
  CHECK(minidet::test::allclose(x_gpu.grad().cpu(), cpu[2], 1e-5, 1e-5));
  // The deterministic backward (here the sorted terms: the planes are too large for the sorted buckets)
  // skips the stray row too, and adds in the CPU's order.
  DeterministicGuard deterministic;
  x_gpu.set_grad(Tensor());
  roi_pool_with_argmax(x_gpu, cat({rois, stray}, 0).cuda(), {3, 3}, 1.0, false).output.backward(upstream.cuda());
  CHECK(x_gpu.grad().to_vector<float>() == cpu[2].to_vector<float>());
}

MINIDET_CUDA_TEST_CASE("cuda/roi_pool: the large-input forwards pick the CPU's pixel on ties and NaN at any bin size") {
  // Inputs of 90 to 160 MB, larger than the 50 MB L2 of the GPUs this was written on (H100, H200): float32 takes
  // the forward over tiles (roi_pool_tiles_cuda.cu), float64 the plane kernels (roi_pool_cuda.cu; a GPU with a
  // larger L2 checks the per-bin kernels instead). Values from {0, 1, 2} and a NaN every 997 pixels: most bins hold
  // several maxima, and the first in row-major order must win, as on the CPU. RoIs up to 0.8 of the map,
  // partly off it, and inverted; output sizes from 3 to 40 bins a row, so bins from under a pixel to over 100
  // wide.
  struct Case {
    DType dtype;
    Shape shape;
    std::array<int64_t, 2> output;
    int64_t rois;
  };
  const Case cases[] = {{kFloat32, {2, 400, 200, 250}, {7, 7}, 300},
                        {kFloat64, {2, 400, 120, 200}, {4, 3}, 200},
                        {kFloat32, {1, 1000, 150, 150}, {2, 40}, 100}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    CAPTURE(c.dtype);
    CAPTURE(c.output[1]);
    Generator g(seed++);
    std::vector<double> values = randint(0, 3, c.shape, kInt64, &g).to(kFloat64).to_vector<double>();
    for (size_t i = 0; i < values.size(); i += 997) values[i] = std::nan("");
    const Tensor x = from_vector<double>(values, c.shape).to(c.dtype);
    const Tensor rois = random_rois(c.rois, c.shape[0], double(c.shape[2]), double(c.shape[3]), seed++).to(c.dtype);
    const Tensor upstream = randn({c.rois, c.shape[1], c.output[0], c.output[1]}, c.dtype, &g);
    const std::vector<Tensor> cpu = pool_and_backward(x, rois, upstream, c.output, 1.0, false);
    const std::vector<Tensor> gpu = pool_and_backward(x, rois, upstream, c.output, 1.0, true);
    CHECK(gpu[1].to_vector<int64_t>() == cpu[1].to_vector<int64_t>());
    const std::vector<double> a = gpu[0].to_vector<double>(), b = cpu[0].to_vector<double>();
    bool same = a.size() == b.size();
    for (size_t i = 0; same && i < a.size(); ++i) same = (a[i] == b[i]) || (std::isnan(a[i]) && std::isnan(b[i]));
    CHECK(same);
    CHECK(minidet::test::allclose(gpu[2], cpu[2], 1e-5, 1e-5));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_pool: the tile forward merges a bin's maxima across tiles as the CPU's scan does") {
  // A float32 input larger than L2 (sized from it): the forward over tiles. Bins up to most of the map cross
  // many 16 x 16 tiles, each giving a partial maximum; their keys must merge into the CPU's pick (roi_pool.h):
  // the first NaN in row-major order, else the first pixel of the largest value, -0 and +0 being equal. The
  // outputs are compared bit for bit, so a zero keeps its sign and a NaN its payload. The first case has only
  // -inf, -1 and both zeros, so most maxima are zeros (read back from the input); the second adds 1, +inf and
  // a NaN every 1,999 pixels. Two RoIs a hundred-thousandth of a pixel tall or wide have bins whose edges
  // round to one whole number inside a tile: empty on the CPU, (0, -1), and so on the GPU.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> palettes = {{-inf, -1.0f, -0.0f, 0.0f}, {-inf, -1.0f, -0.0f, 0.0f, 1.0f, inf}};
  int64_t height = 416;
  while (2 * 64 * height * 520 * int64_t(sizeof(float)) <= minidet::test::gpu_l2_bytes()) height += 64;
  const Shape shape = {2, 64, height, 520};
  uint64_t seed = 130;
  for (size_t which = 0; which < palettes.size(); ++which) {
    CAPTURE(which);
    const std::vector<float>& palette = palettes[which];
    Generator g(seed++);
    const std::vector<int64_t> picks = randint(0, int64_t(palette.size()), shape, kInt64, &g).to_vector<int64_t>();
    std::vector<float> values(picks.size());
    for (size_t i = 0; i < values.size(); ++i) values[i] = palette[size_t(picks[i])];
    if (which == 1)
      for (size_t i = 0; i < values.size(); i += 1999) values[i] = std::nanf("");
    const Tensor x = from_vector<float>(values, shape);
    const Tensor thin = from_vector<float>({0, 10, 100, 40, 99.00001f, 1, 100, 10, 99.00001f, 40}, {2, 5});
    const Tensor rois =
        cat({random_rois(300, shape[0], double(shape[2]), double(shape[3]), seed++).to(kFloat32), thin}, 0);
    const RoIPoolResult cpu = roi_pool_with_argmax(x, rois, {5, 6}, 1.0);
    const RoIPoolResult gpu = roi_pool_with_argmax(x.cuda(), rois.cuda(), {5, 6}, 1.0);
    CHECK(gpu.argmax.to_vector<int64_t>() == cpu.argmax.to_vector<int64_t>());
    CHECK(minidet::test::same_bits(gpu.output.cpu(), cpu.output));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_pool: K and N equal to 0 and bad rois on the device") {
  const Tensor x = zeros({2, 3, 5, 5}, TensorOptions(kFloat32, Device::cuda())).requires_grad_();
  for (bool deterministic : {false, true}) {  // K = 0: every backward writes zeros
    CAPTURE(deterministic);
    DeterministicGuard mode(deterministic);
    x.set_grad(Tensor());
    const Tensor y = roi_pool(x, zeros({0, 5}, TensorOptions(kFloat32, Device::cuda())), {2, 2}, 1.0);
    CHECK(y.sizes() == Shape{0, 3, 2, 2});
    sum(y).backward();
    CHECK(x.grad().to_vector<float>() == std::vector<float>(x.numel(), 0.0f));
  }
  const Tensor bad = from_vector<float>({0, 0, 0, 1, 1, 2, 0, 0, 1, 1}, {2, 5}).cuda();
  CHECK_THROWS_CONTAINING(roi_pool(x, bad, {2, 2}, 1.0), "rois row 1");
  CHECK_THROWS_CONTAINING(roi_pool(x, from_vector<float>({0, 0, 0, 1, 1}, {1, 5}), {2, 2}, 1.0), "same device");
}

TEST_CASE("errors/roi_pool: every bad input names the op and what was expected") {
  const Tensor x = zeros({2, 3, 5, 5}, kFloat64);
  const Tensor rois = from_vector<double>({0, 0, 0, 2, 2}, {1, 5});
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_CONTAINING(roi_pool(x, zeros({3, 4}, kFloat64), {2, 2}, 1.0), "roi_pool: expected rois of shape (K, 5)");
  CHECK_THROWS_CONTAINING(roi_pool(x, zeros({5}, kFloat64), {2, 2}, 1.0), "expected rois of shape");
  CHECK_THROWS_CONTAINING(roi_pool(x, rois.to(kFloat32), {2, 2}, 1.0), "same dtype");
  CHECK_THROWS_CONTAINING(roi_pool(x, rois.to(kInt64), {2, 2}, 1.0), "same dtype");
  CHECK_THROWS_CONTAINING(roi_pool(x, from_vector<double>({0.5, 0, 0, 2, 2}, {1, 5}), {2, 2}, 1.0), "batch index 0.5");
  CHECK_THROWS_CONTAINING(roi_pool(x, from_vector<double>({2, 0, 0, 2, 2}, {1, 5}), {2, 2}, 1.0), "in [0, 2)");
  CHECK_THROWS_CONTAINING(roi_pool(x, from_vector<double>({-1, 0, 0, 2, 2}, {1, 5}), {2, 2}, 1.0), "in [0, 2)");
  CHECK_THROWS_CONTAINING(roi_pool(x, from_vector<double>({0, 0, nan, 2, 2}, {1, 5}), {2, 2}, 1.0), "finite");
  CHECK_THROWS_CONTAINING(roi_pool(x, from_vector<double>({0, 0, 0, inf, 2}, {1, 5}), {2, 2}, 1.0), "finite");
  CHECK_THROWS_CONTAINING(roi_pool(x, rois, {0, 2}, 1.0), "roi_pool: expected output size >= 1");
  CHECK_THROWS_CONTAINING(roi_pool(x, rois, {2, -1}, 1.0), "expected output size >= 1");
  CHECK_THROWS_CONTAINING(roi_pool(x, rois, {2, 2}, 0.0), "expected a finite spatial_scale > 0");
  CHECK_THROWS_CONTAINING(roi_pool(x, rois, {2, 2}, -0.25), "expected a finite spatial_scale > 0");
  CHECK_THROWS_CONTAINING(roi_pool(x, rois, {2, 2}, nan), "expected a finite spatial_scale > 0");
  CHECK_THROWS_CONTAINING(roi_pool(zeros({3, 5, 5}, kFloat64), rois, {2, 2}, 1.0), "roi_pool: expected input (N, C, H, W)");
  CHECK_THROWS_CONTAINING(roi_pool(zeros({1, 3, 5, 5}, kInt64), rois.to(kInt64), {2, 2}, 1.0), "float32 or float64");
  CHECK_THROWS_CONTAINING(roi_pool(Tensor(), rois, {2, 2}, 1.0), "undefined");
  CHECK_THROWS_CONTAINING(roi_pool(x, Tensor(), {2, 2}, 1.0), "undefined");
  // N = 0 images: no batch index is valid, so any RoI is refused.
  CHECK_THROWS_CONTAINING(roi_pool(zeros({0, 3, 5, 5}, kFloat64), rois, {2, 2}, 1.0), "in [0, 0)");
}
