// roi_align_rotated: hand-computed rotations on a linear ramp, the half-turn and mirror symmetries, the
// outside / zero-size / inverted policies, float64 gradient checks, CUDA parity and deterministic bits,
// every bad input.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "ops/reduction/reduction.h"
#include "ops/roi_align/roi_align.h"
#include "ops/roi_align_rotated/roi_align_rotated.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {

constexpr double kPi = 3.14159265358979323846;

// f(y, x) = 10*y + x on an H x W map. Bilinear interpolation reproduces a linear function exactly, so a bin
// whose samples all fall inside the map averages to f at the mean of its samples: easy to compute by hand.
Tensor ramp(int64_t height, int64_t width) {
  std::vector<double> values;
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) values.push_back(10.0 * y + x);
  return from_vector<double>(values, {1, 1, height, width});
}

// `count` rotated RoIs (batch, cx, cy, w, h, angle) over images of image_h x image_w pixels: centres past
// every border, sizes up to 60% of the image, any angle. Every seventh RoI is zero-size and every fifth has
// a negative width, to exercise those policies.
Tensor random_rotated_rois(int64_t count, int64_t batch, double image_h, double image_w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> values;
  for (int64_t k = 0; k < count; ++k) {
    const double cx = (unit(rng) * 1.4 - 0.2) * image_w, cy = (unit(rng) * 1.4 - 0.2) * image_h;
    double w = unit(rng) * 0.6 * image_w, h = unit(rng) * 0.6 * image_h;
    if (k % 7 == 6) w = h = 0;
    if (k % 5 == 4) w = -w;
    values.insert(values.end(), {double(rng() % batch), cx, cy, w, h, (unit(rng) * 2 - 1) * kPi});
  }
  return from_vector<double>(values, {count, 6});
}

Tensor rois_of(const std::vector<double>& rows) {
  return from_vector<double>(rows, {static_cast<int64_t>(rows.size() / 6), 6});
}

// out[k, c, PH-1-p, PW-1-q] (flip_rows) or out[k, c, p, PW-1-q]: bins read in reverse order.
std::vector<double> reversed_bins(const Tensor& out, bool flip_rows) {
  const int64_t planes = out.size(0) * out.size(1), ph = out.size(2), pw = out.size(3);
  const std::vector<double> v = out.to_vector<double>();
  std::vector<double> r(v.size());
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t p = 0; p < ph; ++p)
      for (int64_t q = 0; q < pw; ++q)
        r[(plane * ph + p) * pw + q] = v[(plane * ph + (flip_rows ? ph - 1 - p : p)) * pw + (pw - 1 - q)];
  return r;
}

void check_close(const std::vector<double>& a, const std::vector<double>& b, double tolerance) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(a[i] - b[i]) <= tolerance);
  }
}

}  // namespace

TEST_CASE("values/roi_align_rotated: a quarter turn counter-clockwise and clockwise on a ramp") {
  const Tensor x = ramp(10, 10).requires_grad_();
  // Centre (4, 5), w 4, h 2, angle pi/2, aligned = false (no half-pixel shift), one sample per bin.
  // Box frame: u = -1, +1 (bins q), v = -0.5, +0.5 (bins p). Counter-clockwise on screen:
  //   x = 4 + u cos + v sin = 4 + v,   y = 5 - u sin + v cos = 5 - u
  //   (p, q) = (0, 0): (y, x) = (6, 3.5) -> 63.5   (0, 1): (4, 3.5) -> 43.5
  //            (1, 0): (6, 4.5) -> 64.5            (1, 1): (4, 4.5) -> 44.5
  const Tensor rois = rois_of({0, 4, 5, 4, 2, kPi / 2});
  auto options = RoIAlignRotatedOptions().set_output_size(2).set_sampling_ratio(1).set_aligned(false);
  const Tensor y = roi_align_rotated(x, rois, options);
  check_close(y.to_vector<double>(), {63.5, 43.5, 64.5, 44.5}, 1e-12);
  // Each sample sits halfway between two columns of one row: weight 1/2 to each, and the middle columns
  // are shared by two samples.
  sum(y).backward();
  std::vector<double> expected(100, 0.0);
  expected[6 * 10 + 3] = 0.5, expected[6 * 10 + 4] = 1, expected[6 * 10 + 5] = 0.5;
  expected[4 * 10 + 3] = 0.5, expected[4 * 10 + 4] = 1, expected[4 * 10 + 5] = 0.5;
  check_close(x.grad().to_vector<double>(), expected, 1e-12);
  // clockwise = true turns the other way: x = 4 - v, y = 5 + u (AerialDetection's rotated RoIAlign formula).
  check_close(roi_align_rotated(x.detach(), rois, options.set_clockwise(true)).to_vector<double>(),
              {44.5, 64.5, 43.5, 63.5}, 1e-12);
  // Two samples per bin axis average to the bin centre on a ramp: the same values.
  check_close(roi_align_rotated(x.detach(), rois, options.set_clockwise(false).set_sampling_ratio(2)).to_vector<double>(),
              {63.5, 43.5, 64.5, 44.5}, 1e-12);
}

TEST_CASE("values/roi_align_rotated: a half turn reverses the bins and a negative width mirrors them") {
  Generator g(7);
  const Tensor x = randn({2, 3, 12, 11}, kFloat64, &g);
  for (bool aligned : {true, false}) {
    CAPTURE(aligned);
    const auto options = RoIAlignRotatedOptions().set_output_size(3, 4).set_sampling_ratio(2).set_aligned(aligned);
    const Tensor base = roi_align_rotated(x, rois_of({1, 5.3, 6.1, 6.4, 4.2, 0.4}), options);
    // theta + pi maps (u, v) to (-u, -v): sample j becomes sample (last - j) on both axes.
    const Tensor turned = roi_align_rotated(x, rois_of({1, 5.3, 6.1, 6.4, 4.2, 0.4 + kPi}), options);
    check_close(turned.to_vector<double>(), reversed_bins(base, true), 1e-10);
    // w -> -w: u_j becomes -u_j, so the bins of a row are read right to left.
    const Tensor mirrored = roi_align_rotated(x, rois_of({1, 5.3, 6.1, -6.4, 4.2, 0.4}), options);
    if (aligned) check_close(mirrored.to_vector<double>(), reversed_bins(base, false), 1e-12);
    else CHECK(mirrored.to_vector<double>() != base.to_vector<double>());  // legacy: max(w, 1) = 1, a thin box
  }
}

TEST_CASE("values/roi_align_rotated: samples outside the map read 0 but count and zero-size boxes read their centre") {
  // Ones on a 3 x 3 map; box centre (4, 1), w 4, h 2, angle 0, aligned = false, 2 x 2 samples per bin.
  // Sample columns x = 2.5, 3.5 (bin 0) and 4.5, 5.5 (bin 1); rows y = 0.5, 1.5. x = 2.5 is inside the band
  // [-1, 3] and clamps to column 2 (reads 1); x = 3.5 and beyond are outside (read 0, still counted).
  const Tensor ones_map = ones({1, 1, 3, 3}, kFloat64).requires_grad_();
  const auto options = RoIAlignRotatedOptions().set_output_size(1, 2).set_sampling_ratio(2).set_aligned(false);
  const Tensor y = roi_align_rotated(ones_map, rois_of({0, 4, 1, 4, 2, 0}), options);
  check_close(y.to_vector<double>(), {0.5, 0.0}, 1e-12);
  sum(y).backward();
  // The two in-band samples (0.5, 2.5) and (1.5, 2.5), each with share 1/4, split between rows.
  check_close(ones_map.grad().to_vector<double>(), {0, 0, 0.125, 0, 0, 0.25, 0, 0, 0.125}, 1e-12);

  // A zero-size box (aligned): every sample sits on the centre (4 - 0.5, 5 - 0.5) = (x 3.5, y 4.5).
  const Tensor x = ramp(8, 8).requires_grad_();
  const Tensor point = roi_align_rotated(x, rois_of({0, 4, 5, 0, 0, 0.3}), RoIAlignRotatedOptions().set_output_size(2));
  check_close(point.to_vector<double>(), std::vector<double>(4, 48.5), 1e-12);
  sum(point).backward();
  std::vector<double> expected(64, 0.0);
  for (int64_t pixel : {4 * 8 + 3, 4 * 8 + 4, 5 * 8 + 3, 5 * 8 + 4}) expected[pixel] = 1.0;  // 4 bins x 1/4
  check_close(x.grad().to_vector<double>(), expected, 1e-12);

  // Entirely outside the map: zeros, and no gradient.
  const Tensor far = roi_align_rotated(x.detach(), rois_of({0, 40, -30, 5, 3, 1.0}), RoIAlignRotatedOptions());
  CHECK(far.to_vector<double>() == std::vector<double>(49, 0.0));
}

TEST_CASE("values/roi_align_rotated: at angle 0 it equals roi_align on the axis-aligned box") {
  // Box (cx, cy, w, h, 0) is roi_align's (cx - w/2, cy - h/2, cx + w/2, cy + h/2): same samples, same weights.
  Generator g(21);
  const Tensor x = randn({2, 3, 13, 15}, kFloat64, &g);
  std::mt19937_64 rng(22);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (bool aligned : {true, false}) {
    for (int64_t sampling : {2, 0}) {
      CAPTURE(aligned);
      CAPTURE(sampling);
      std::vector<double> rotated, axis_aligned;
      for (int k = 0; k < 12; ++k) {
        // Image pixels at scale 0.5; centres past the borders; widths of 2..24 (>= 1 feature pixel, where the
        // legacy minimum size of the two ops agrees), and with aligned = true some inverted ones.
        const double cx = (unit(rng) * 1.4 - 0.2) * 30, cy = (unit(rng) * 1.4 - 0.2) * 26;
        double w = 2 + unit(rng) * 22, h = 2 + unit(rng) * 18;
        if (aligned && k % 4 == 3) w = -w;
        const double batch = double(k % 2);
        rotated.insert(rotated.end(), {batch, cx, cy, w, h, 0.0});
        axis_aligned.insert(axis_aligned.end(), {batch, cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2});
      }
      const Tensor upstream = randn({12, 3, 3, 4}, kFloat64, &g);
      const Tensor x_rotated = x.clone().requires_grad_(), x_aligned = x.clone().requires_grad_();
      const Tensor y_rotated = roi_align_rotated(
          x_rotated, rois_of(rotated),
          RoIAlignRotatedOptions().set_output_size(3, 4).set_spatial_scale(0.5).set_sampling_ratio(sampling).set_aligned(aligned));
      const Tensor y_aligned = roi_align(
          x_aligned, from_vector<double>(axis_aligned, {12, 5}),
          RoIAlignOptions().set_output_size(3, 4).set_spatial_scale(0.5).set_sampling_ratio(sampling).set_aligned(aligned));
      check_close(y_rotated.to_vector<double>(), y_aligned.to_vector<double>(), 1e-10);
      y_rotated.backward(upstream);
      y_aligned.backward(upstream);
      check_close(x_rotated.grad().to_vector<double>(), x_aligned.grad().to_vector<double>(), 1e-10);
      CHECK(test::max_abs_diff(x_rotated.grad(), zeros_like(x_rotated.grad())) > 0.1);  // not vacuous
    }
  }
}

TEST_CASE("values/roi_align_rotated: K or N equal to 0 give empty results and zero gradients") {
  const Tensor x = ones({2, 3, 6, 6}, kFloat64).requires_grad_();
  const Tensor y = roi_align_rotated(x, zeros({0, 6}, kFloat64), RoIAlignRotatedOptions().set_output_size(2, 3));
  CHECK(y.sizes() == Shape{0, 3, 2, 3});
  sum(y).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>(x.numel(), 0.0));
  const Tensor no_images = zeros({0, 3, 6, 6}, kFloat64).requires_grad_();
  const Tensor empty_out = roi_align_rotated(no_images, zeros({0, 6}, kFloat64));
  CHECK(empty_out.sizes() == Shape{0, 3, 7, 7});
  sum(empty_out).backward();
  CHECK(no_images.grad().sizes() == Shape{0, 3, 6, 6});
}

TEST_CASE("gradcheck/roi_align_rotated: angles scales sampling and both alignments in float64") {
  struct Case {
    std::string what;
    Shape input;
    RoIAlignRotatedOptions options;
  };
  const std::vector<Case> cases = {
      {"aligned sampling 2", {2, 2, 7, 8}, RoIAlignRotatedOptions().set_output_size(2, 3).set_sampling_ratio(2)},
      {"adaptive scale 0.5", {2, 3, 6, 6},
       RoIAlignRotatedOptions().set_output_size(2).set_spatial_scale(0.5).set_sampling_ratio(0)},
      {"legacy aligned false clockwise", {1, 2, 8, 7},
       RoIAlignRotatedOptions().set_output_size(3, 2).set_sampling_ratio(3).set_aligned(false).set_clockwise(true)},
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const Tensor x = test::random_leaf(c.input, seed++);
    const double s = c.options.spatial_scale;
    const Tensor rois = random_rotated_rois(6, c.input[0], c.input[2] / s, c.input[3] / s, seed++);
    const RoIAlignRotatedOptions options = c.options;
    const auto result =
        autograd::gradcheck([&](const TensorList& in) { return roi_align_rotated(in[0], rois, options); }, {x});
    MESSAGE("roi_align_rotated " << c.what << ": max_abs_error " << result.max_abs_error);
    CHECK_MESSAGE(result.ok, result.report);
  }
}

TEST_CASE("gradcheck/roi_align_rotated: non-contiguous input") {
  Generator g(30);
  const Tensor x = randn({2, 6, 7, 3}, kFloat64, &g).permute({0, 3, 1, 2}).requires_grad_();
  REQUIRE_FALSE(x.is_contiguous());
  const Tensor rois = random_rotated_rois(4, 2, 6, 7, 31);
  const auto options = RoIAlignRotatedOptions().set_output_size(2).set_sampling_ratio(2);
  const auto result =
      autograd::gradcheck([&](const TensorList& in) { return roi_align_rotated(in[0], rois, options); }, {x});
  MESSAGE("roi_align_rotated non-contiguous: max_abs_error " << result.max_abs_error);
  CHECK_MESSAGE(result.ok, result.report);
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align_rotated: forward and input gradient match the CPU") {
  struct Case {
    Shape input;
    int64_t rois;
    RoIAlignRotatedOptions options;
  };
  const std::vector<Case> cases = {
      {{2, 3, 9, 11}, 12, RoIAlignRotatedOptions().set_output_size(3, 2).set_sampling_ratio(2)},
      {{1, 4, 16, 16}, 9, RoIAlignRotatedOptions().set_output_size(7).set_aligned(false).set_clockwise(true)},
      {{3, 32, 25, 34}, 200, RoIAlignRotatedOptions().set_output_size(7).set_spatial_scale(0.25).set_sampling_ratio(2)},
      {{2, 8, 20, 20}, 40, RoIAlignRotatedOptions().set_output_size(4).set_spatial_scale(0.5)},  // adaptive
  };
  uint64_t seed = 40;
  for (const Case& c : cases) {
    for (DType dtype : {kFloat32, kFloat64}) {
      CAPTURE(dtype);
      CAPTURE(c.input[1]);
      Generator g(seed++);
      const double s = c.options.spatial_scale;
      const Tensor x_cpu = randn(c.input, dtype, &g);
      const Tensor rois_cpu = random_rotated_rois(c.rois, c.input[0], c.input[2] / s, c.input[3] / s, seed++).to(dtype);
      const Tensor upstream = randn({c.rois, c.input[1], c.options.pooled_h, c.options.pooled_w}, dtype, &g);
      std::vector<Tensor> results[2];
      for (int device = 0; device < 2; ++device) {
        const Tensor x = (device ? x_cpu.cuda() : x_cpu.clone()).requires_grad_();
        const Tensor y = roi_align_rotated(x, device ? rois_cpu.cuda() : rois_cpu, c.options);
        y.backward(upstream.to(x.device()));
        results[device] = {y.detach().cpu(), x.grad().cpu()};
      }
      // Sample positions may differ in the last bit (sin/cos), the forward's sums of products round
      // differently (the GPU fuses them) and the atomic scatter adds in another order: float32 tolerances
      // for sums of O(1) values over a few hundred samples.
      const double tolerance = dtype == kFloat32 ? 1e-4 : 1e-10;
      CHECK(minidet::test::allclose(results[1][0], results[0][0], tolerance, tolerance));
      CHECK(minidet::test::allclose(results[1][1], results[0][1], tolerance, tolerance));
    }
  }
}

MINIDET_CUDA_TEST_CASE(
    "cuda/roi_align_rotated: both deterministic backwards give identical bits twice and match the CPU") {
  DeterministicGuard deterministic;
  for (int64_t sampling : {2, 0}) {  // 2: the sorted terms; 0 (adaptive): the tile gather
    CAPTURE(sampling);
    Generator g(50 + sampling);
    // Few pixels and many overlapping RoIs: most pixels receive from many samples of many RoIs.
    const Tensor x_cpu = randn({2, 16, 12, 13}, kFloat32, &g);
    const Tensor rois_cpu = random_rotated_rois(300, 2, 24, 26, 51 + sampling).to(kFloat32);
    const auto options = RoIAlignRotatedOptions().set_output_size(3).set_spatial_scale(0.5).set_sampling_ratio(sampling);
    const Tensor upstream = randn({300, 16, 3, 3}, kFloat32, &g);
    const Tensor x_cpu_leaf = x_cpu.clone().requires_grad_();
    roi_align_rotated(x_cpu_leaf, rois_cpu, options).backward(upstream);
    const Tensor x = x_cpu.cuda().requires_grad_();
    std::vector<float> first;
    for (int round = 0; round < 2; ++round) {
      x.set_grad(Tensor());
      roi_align_rotated(x, rois_cpu.cuda(), options).backward(upstream.cuda());
      const std::vector<float> grad = x.grad().to_vector<float>();
      if (round == 0) first = grad;
      else CHECK(grad == first);
    }
    // The gather adds in the CPU's order with the CPU's arithmetic; only sin and cos may differ in the last
    // bit between the devices' math libraries (roi_align_rotated_kernels.h).
    CHECK(minidet::test::allclose(from_vector<float>(first, x.sizes()), x_cpu_leaf.grad(), 1e-5, 1e-5));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_align_rotated: K equal to 0 and bad rois on the device") {
  const TensorOptions on_gpu(kFloat32, Device::cuda());
  const Tensor x = zeros({2, 3, 5, 5}, on_gpu).requires_grad_();
  const Tensor y = roi_align_rotated(x, zeros({0, 6}, on_gpu), RoIAlignRotatedOptions().set_output_size(2));
  CHECK(y.sizes() == Shape{0, 3, 2, 2});
  sum(y).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>(x.numel(), 0.0f));
  const float nan = std::nanf("");
  const Tensor bad = from_vector<float>({0, 1, 1, 2, 2, 0, 1, 1, 1, 2, 2, nan}, {2, 6}).cuda();
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, bad), "rois row 1");
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, from_vector<float>({0, 1, 1, 2, 2, 0}, {1, 6})), "same device");
}

TEST_CASE("errors/roi_align_rotated: every bad input names the op and what was expected") {
  const Tensor x = zeros({2, 3, 5, 5}, kFloat64);
  const Tensor rois = rois_of({0, 2, 2, 3, 2, 0.5});
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const RoIAlignRotatedOptions o;
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, zeros({3, 5}, kFloat64)),
                          "roi_align_rotated: expected rois of shape (K, 6) rows (batch_index, cx, cy, w, h, angle)");
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, zeros({6}, kFloat64)), "expected rois of shape");
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, rois.to(kFloat32)), "same dtype");
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, rois_of({1.5, 2, 2, 3, 2, 0})), "batch index 1.5");
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, rois_of({2, 2, 2, 3, 2, 0})), "in [0, 2)");
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, rois_of({0, 2, 2, 3, 2, nan})), "finite");
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, rois_of({0, inf, 2, 3, 2, 0})), "finite");
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, rois, RoIAlignRotatedOptions(o).set_output_size(0, 2)),
                          "roi_align_rotated: expected output size >= 1");
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, rois, RoIAlignRotatedOptions(o).set_spatial_scale(0)),
                          "expected a finite spatial_scale > 0");
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, rois, RoIAlignRotatedOptions(o).set_spatial_scale(inf)),
                          "expected a finite spatial_scale > 0");
  CHECK_THROWS_CONTAINING(roi_align_rotated(zeros({3, 5, 5}, kFloat64), rois), "expected input (N, C, H, W)");
  CHECK_THROWS_CONTAINING(roi_align_rotated(zeros({2, 3, 5, 5}, kInt64), rois.to(kInt64)), "float32 or float64");
  CHECK_THROWS_CONTAINING(roi_align_rotated(zeros({0, 3, 5, 5}, kFloat64), rois), "in [0, 0)");
  CHECK_THROWS_CONTAINING(roi_align_rotated(Tensor(), rois), "undefined");
}

TEST_CASE("errors/roi_align_rotated: rois that require grad are refused with the reason") {
  const Tensor x = zeros({1, 2, 5, 5}, kFloat64).requires_grad_();
  const Tensor rois = rois_of({0, 2, 2, 3, 2, 0.5}).requires_grad_();
  CHECK_THROWS_CONTAINING(roi_align_rotated(x, rois),
                          "the gradient with respect to rois is not supported for the rotated op");
  // Detached rois, or no grad mode at all, are fine.
  CHECK(roi_align_rotated(x, rois.detach()).sizes() == Shape{1, 2, 7, 7});
  NoGradGuard no_grad;
  CHECK(roi_align_rotated(x, rois).sizes() == Shape{1, 2, 7, 7});
}
