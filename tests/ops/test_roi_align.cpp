// roi_align: hand-computed cases, the edge-case policy, float64 gradient checks of both
// gradients (features and box coordinates), CUDA parity and determinism, and every validation error.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/deterministic.h"
#include "core/transfer_counts.h"
#include "core/factories.h"
#include "ops/indexing/index_select.h"
#include "ops/roi_align/roi_align.h"
#include "ops/roi_align/roi_align_kernels.h"  // the kernels themselves, for the bit-for-bit cases
#include "ops/roi_align/roi_align_separable.h"
#include "ops/shape/cat.h"
#include "ops/sort/sort.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using minidet::test::max_abs_diff;

namespace {

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

// K random boxes (x1, y1, x2, y2) in image pixels over a (height x width) feature map at `scale`, with
// some boxes spilling over the border; batch indices cycle through [0, images).
struct RandomRois {
  Tensor batch;  // (K, 1)
  Tensor boxes;  // (K, 4)
};
RandomRois random_rois(int64_t count, int64_t images, double height, double width, double scale, uint64_t seed,
                       DType dtype = kFloat64) {
  Generator g(seed);
  const std::vector<double> u = rand({count, 4}, kFloat64, &g).to_vector<double>();
  std::vector<double> batch, boxes;
  for (int64_t k = 0; k < count; ++k) {
    const double w = (0.2 + 0.7 * u[k * 4 + 2]) * width / scale, h = (0.2 + 0.7 * u[k * 4 + 3]) * height / scale;
    const double x1 = (u[k * 4 + 0] * 1.1 - 0.15) * width / scale, y1 = (u[k * 4 + 1] * 1.1 - 0.15) * height / scale;
    batch.push_back(double(k % images));
    boxes.insert(boxes.end(), {x1, y1, x1 + w, y1 + h});
  }
  return {from_vector<double>(batch, {count, 1}).to(dtype), from_vector<double>(boxes, {count, 4}).to(dtype)};
}

Tensor rois_of(const RandomRois& r) { return cat({r.batch, r.boxes}, 1); }

Tensor rois_from(const std::vector<double>& rows) {
  return from_vector<double>(rows, {int64_t(rows.size() / 5), 5});
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

bool all_finite(const Tensor& t) {
  for (double v : values(t))
    if (!std::isfinite(v)) return false;
  return true;
}

void check_close(const std::vector<double>& got, const std::vector<double>& expected, double tol = 1e-12) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(got[i] - expected[i]) <= tol);
  }
}

// gradcheck of roi_align in float64 w.r.t. the features and the box columns (the batch column is a
// constant: it is not differentiable and a finite difference would make it a non-integer).
void gradcheck_case(const std::string& what, const Tensor& input, const RandomRois& rois,
                    const RoIAlignOptions& options, bool box_grad) {
  CAPTURE(what);
  Tensor x = input;
  x.requires_grad_();
  const Tensor boxes = box_grad ? rois.boxes.clone().requires_grad_() : rois.boxes;
  const Tensor batch = rois.batch;
  const auto fn = [options, batch](const TensorList& in) { return roi_align(in[0], cat({batch, in[1]}, 1), options); };
  const auto result = autograd::gradcheck(fn, {x, boxes});
  MESSAGE(what << ": max_abs_error " << result.max_abs_error);
  CHECK_MESSAGE(result.ok, result.report);
}

}  // namespace

// ---- values ---------------------------------------------------------------------------------------------

TEST_CASE("values/roi_align: hand-computed bins of roi 1 1 3 3 on arange 5x5 aligned false and true") {
  const Tensor x = arange(0, 25, 1, kFloat64).view({1, 1, 5, 5});
  const Tensor rois = rois_from({0, 1, 1, 3, 3});
  auto options = RoIAlignOptions().set_output_size(4).set_spatial_scale(1).set_sampling_ratio(0);
  check_close(values(roi_align(x, rois, options.set_aligned(false))),
              {7.5, 8, 8.5, 9, 10, 10.5, 11, 11.5, 12.5, 13, 13.5, 14, 15, 15.5, 16, 16.5});
  check_close(values(roi_align(x, rois, options.set_aligned(true))),
              {4.5, 5, 5.5, 6, 7, 7.5, 8, 8.5, 9.5, 10, 10.5, 11, 12, 12.5, 13, 13.5});
}

TEST_CASE("values/roi_align: 2x2 input with a clamped corner sample gives the hand-computed output and gradient") {
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2}).requires_grad_();
  const Tensor y = roi_align(x, rois_from({0, 0, 0, 1, 1}),
                             RoIAlignOptions().set_output_size(2).set_sampling_ratio(2).set_aligned(true));
  check_close(values(y), {1, 1.25, 1.5, 1.75});
  y.backward(ones_like(y));
  check_close(values(x.grad()), {3.0625, 0.4375, 0.4375, 0.0625});
}

TEST_CASE("values/roi_align: max mode keeps the best sample and sends the gradient to its neighbours") {
  // f(y, x) = 5y + x is linear, so every bilinear sample reads exactly 5y + x. aligned = false, scale 1:
  // the box starts at 1 with size 2, bins of 1, samples at +0.25 and +0.75; the best one is the far corner.
  const Tensor x = arange(0, 25, 1, kFloat64).view({1, 1, 5, 5}).requires_grad_();
  const auto options =
      RoIAlignOptions().set_output_size(2).set_sampling_ratio(2).set_aligned(false).set_pool_mode(RoiPoolMode::Max);
  const Tensor y = roi_align(x, rois_from({0, 1, 1, 3, 3}), options);
  check_close(values(y), {10.5, 11.5, 15.5, 16.5});
  y.backward(ones_like(y));
  // Winners at (1.75, 1.75), (1.75, 2.75), (2.75, 1.75), (2.75, 2.75), weights 1/16, 3/16, 3/16, 9/16 each.
  check_close(values(x.grad()), {0, 0,      0,    0,      0,  //
                                 0, 0.0625, 0.25, 0.1875, 0,  //
                                 0, 0.25,   1.0,  0.75,   0,  //
                                 0, 0.1875, 0.75, 0.5625, 0,  //
                                 0, 0,      0,    0,      0});
}

TEST_CASE("values/roi_align: max mode ties go to the first sample") {
  // A constant map: all four samples tie, the first (top-left, at (0.75, 0.75)) wins.
  const Tensor x = ones({1, 1, 3, 3}, kFloat64).requires_grad_();
  const auto options =
      RoIAlignOptions().set_output_size(1).set_sampling_ratio(2).set_aligned(false).set_pool_mode(RoiPoolMode::Max);
  const Tensor y = roi_align(x, rois_from({0, 0.5, 0.5, 1.5, 1.5}), options);
  check_close(values(y), {1});
  y.backward(ones_like(y));
  check_close(values(x.grad()), {0.0625, 0.1875, 0, 0.1875, 0.5625, 0, 0, 0, 0});
}

TEST_CASE("values/roi_align: policy for RoIs partly and fully outside the map") {
  // Samples at x = -3.5, -2.5, -1.5 are outside [-1, W]: 0; x = -0.5 reads the clamped border: 1.
  const Tensor x = ones({1, 1, 4, 4}, kFloat64).requires_grad_();
  const auto options = RoIAlignOptions().set_output_size(1, 4).set_sampling_ratio(1).set_aligned(false);
  const Tensor y = roi_align(x, rois_from({0, -4, 0, 0, 4, /*fully outside*/ 0, 10, 10, 14, 14}), options);
  check_close(values(y), {0, 0, 0, 1, 0, 0, 0, 0});
  y.backward(ones_like(y));
  // Only the border sample (y = 2, x clamped to 0) lands: on pixel (2, 0).
  std::vector<double> expected(16, 0.0);
  expected[2 * 4 + 0] = 1;
  check_close(values(x.grad()), expected);
}

TEST_CASE("values/roi_align: the average in separable form, Aᵀ · X · B and A · dY · Bᵀ, is the per-sample sum") {
  // roi_align_separable.h's claim, checked against the op's own forward and backward in float64: for every
  // RoI, A and B built from for_each_axis_tap, then Y[k, c] = Aᵀ · X[n, c] · B / count and
  // dX[n, c] += A · dY[k, c] / count · Bᵀ. The RoIs: random_rois's (some over the border), and rows entirely
  // outside, of zero size, inverted and one pixel from the last row and column (the clamped taps).
  struct Case {
    const char* what;
    RoIAlignOptions options;
  };
  const std::vector<Case> cases = {
      {"aligned, sampling 2", RoIAlignOptions().set_output_size(7).set_sampling_ratio(2).set_spatial_scale(0.25)},
      {"aligned, adaptive", RoIAlignOptions().set_output_size(3, 5).set_spatial_scale(0.25)},
      {"legacy, adaptive", RoIAlignOptions().set_output_size(4, 2).set_spatial_scale(0.25).set_aligned(false)},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const int64_t images = 2, channels = 3, height = 9, width = 11;
    const Tensor x = random({images, channels, height, width}, kFloat64, 40).requires_grad_();
    const Tensor extra = rois_from({1, -90, -90, -50, -50, /*outside*/ 0, 13, 13, 13, 13, /*zero size*/
                                    1, 30, 20, 6, 3, /*inverted*/ 0, 30, 20, 43.9, 35.9 /*to the last pixel*/});
    const Tensor rois = cat({rois_of(random_rois(12, images, height, width, 0.25, 41)), extra}, 0);
    const Tensor y = roi_align(x, rois, c.options);
    const Tensor dy = random(y.sizes(), kFloat64, 42);
    y.backward(dy);

    const ops::detail::RoiAlignGeometry g = ops::detail::roi_align_geometry(x, rois, c.options);
    const std::vector<double> r = values(rois), up = values(dy), input = values(x);
    std::vector<double> separable(size_t(x.numel()), 0.0), forward(size_t(y.numel()), 0.0);
    for (int64_t k = 0; k < rois.size(0); ++k) {
      const ops::detail::RoiBox<double> b = ops::detail::roi_box(&r[size_t(k * 5)], g);
      std::vector<double> A(size_t(height * g.pooled_h), 0.0), B(size_t(width * g.pooled_w), 0.0);
      ops::detail::for_each_axis_tap(b.start_y, b.roi_h, b.grid_h, g.pooled_h, height,
                                     [&](int64_t p, int64_t row, double w) { A[size_t(row * g.pooled_h + p)] += w; });
      ops::detail::for_each_axis_tap(b.start_x, b.roi_w, b.grid_w, g.pooled_w, width,
                                     [&](int64_t q, int64_t col, double w) { B[size_t(col * g.pooled_w + q)] += w; });
      for (int64_t ch = 0; ch < channels; ++ch)
        for (int64_t row = 0; row < height; ++row)
          for (int64_t col = 0; col < width; ++col) {
            double sum = 0;
            for (int64_t p = 0; p < g.pooled_h; ++p)
              for (int64_t q = 0; q < g.pooled_w; ++q)
                sum += A[size_t(row * g.pooled_h + p)] * B[size_t(col * g.pooled_w + q)] *
                       up[size_t(((k * channels + ch) * g.pooled_h + p) * g.pooled_w + q)];
            separable[size_t(((b.batch * channels + ch) * height + row) * width + col)] += sum / double(b.count());
          }
      for (int64_t ch = 0; ch < channels; ++ch)
        for (int64_t p = 0; p < g.pooled_h; ++p)
          for (int64_t q = 0; q < g.pooled_w; ++q) {
            double sum = 0;
            for (int64_t row = 0; row < height; ++row)
              for (int64_t col = 0; col < width; ++col)
                sum += A[size_t(row * g.pooled_h + p)] * B[size_t(col * g.pooled_w + q)] *
                       input[size_t(((b.batch * channels + ch) * height + row) * width + col)];
            forward[size_t(((k * channels + ch) * g.pooled_h + p) * g.pooled_w + q)] = sum / double(b.count());
          }
    }
    const std::vector<double> output = values(y);
    double worst_forward = 0;
    for (size_t i = 0; i < output.size(); ++i)
      worst_forward = std::max(worst_forward, std::abs(output[i] - forward[i]));
    CHECK(worst_forward <= 1e-12);
    const std::vector<double> expected = values(x.grad());
    REQUIRE(max_abs_diff(x.grad(), zeros_like(x.grad())) > 0);
    double worst = 0;
    for (size_t i = 0; i < expected.size(); ++i) worst = std::max(worst, std::abs(expected[i] - separable[i]));
    CHECK(worst <= 1e-12);
  }
}

TEST_CASE("values/roi_align: a zero-size RoI reads one point in every bin") {
  // aligned: the point (1.5, 1.5) - 0.5 = pixel (1, 1) exactly, value 6, one sample per bin (adaptive).
  const Tensor x = arange(0, 25, 1, kFloat64).view({1, 1, 5, 5}).requires_grad_();
  const Tensor y = roi_align(x, rois_from({0, 1.5, 1.5, 1.5, 1.5}), RoIAlignOptions().set_output_size(2));
  check_close(values(y), {6, 6, 6, 6});
  y.backward(ones_like(y));
  std::vector<double> expected(25, 0.0);
  expected[6] = 4;
  check_close(values(x.grad()), expected);
}

TEST_CASE("values/roi_align: an inverted RoI is the mirror image of the ordered one") {
  const Tensor x = random({1, 2, 6, 7}, kFloat64, 3);
  const auto options = RoIAlignOptions().set_output_size(3, 4).set_sampling_ratio(2);
  const Tensor ordered = roi_align(x, rois_from({0, 1.2, 0.7, 5.3, 4.1}), options);
  const Tensor inverted = roi_align(x, rois_from({0, 5.3, 4.1, 1.2, 0.7}), options);
  const std::vector<double> a = values(ordered), b = values(inverted);
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t p = 0; p < 3; ++p)
      for (int64_t q = 0; q < 4; ++q) {
        CAPTURE(c * 100 + p * 10 + q);
        CHECK(std::abs(a[(c * 3 + p) * 4 + q] - b[(c * 3 + (2 - p)) * 4 + (3 - q)]) <= 1e-12);
      }
  // aligned = false: the legacy clamp makes an inverted box one pixel wide and high, never NaN.
  CHECK(all_finite(roi_align(x, rois_from({0, 5.3, 4.1, 1.2, 0.7}), RoIAlignOptions().set_aligned(false))));
}

TEST_CASE("values/roi_align: no NaN for wild but finite boxes in both modes") {
  const Tensor x = random({2, 3, 5, 6}, kFloat64, 4).requires_grad_();
  const Tensor boxes = from_vector<double>({-1e6, -1e6, 1e6, 1e6, 3, 3, 3, 3, 4, 1, -2, 0, -50, 2, -40, 3, 1, 1, 2, 2},
                                           {5, 4}).requires_grad_();
  const Tensor rois = cat({from_vector<double>({0, 1, 0, 1, 1}, {5, 1}), boxes}, 1);
  for (RoiPoolMode mode : {RoiPoolMode::Avg, RoiPoolMode::Max}) {
    x.set_grad(Tensor());
    boxes.set_grad(Tensor());
    const Tensor y = roi_align(x, rois, RoIAlignOptions().set_output_size(2).set_sampling_ratio(2).set_pool_mode(mode));
    CHECK(all_finite(y));
    y.backward(random(y.sizes(), kFloat64, 5));
    CHECK(all_finite(x.grad()));
    CHECK(all_finite(boxes.grad()));
  }
}

TEST_CASE("values/roi_align: K = 0 and N = 0 give shaped empty results and zero gradients") {
  const Tensor x = random({2, 3, 4, 4}, kFloat64, 6).requires_grad_();
  const Tensor no_rois = zeros({0, 5}, kFloat64).requires_grad_();
  const Tensor y = roi_align(x, no_rois, RoIAlignOptions().set_output_size(2, 3));
  CHECK(y.sizes() == Shape{0, 3, 2, 3});
  y.backward(zeros_like(y));
  CHECK(x.grad().sizes() == x.sizes());
  CHECK(values(x.grad()) == std::vector<double>(x.numel(), 0.0));
  const Tensor empty_batch = zeros({0, 3, 4, 4}, kFloat64).requires_grad_();
  const Tensor y0 = roi_align(empty_batch, zeros({0, 5}, kFloat64), RoIAlignOptions().set_pool_mode(RoiPoolMode::Max));
  CHECK(y0.sizes() == Shape{0, 3, 7, 7});
  y0.backward(zeros_like(y0));
  CHECK(empty_batch.grad().sizes() == empty_batch.sizes());
}

TEST_CASE("values/roi_align: non-contiguous input gives the contiguous result") {
  const Tensor nhwc = random({2, 6, 7, 3}, kFloat64, 7);
  const Tensor x = nhwc.permute({0, 3, 1, 2});
  const RandomRois r = random_rois(5, 2, 6, 7, 0.5, 8);
  const auto options = RoIAlignOptions().set_spatial_scale(0.5).set_output_size(3);
  CHECK(max_abs_diff(roi_align(x, rois_of(r), options), roi_align(x.contiguous(), rois_of(r), options)) == 0.0);
}

TEST_CASE("values/roi_align: channels are independent: 70 at once equal each alone, over two chunks of RoIs") {
  // The CPU kernels cut the channels into blocks (64 in the forward; 16 to 64 in the input gradient, by the
  // thread count) and the RoIs into chunks of 65,536 samples. Each output and gradient element must still
  // be what a one-channel input gives, bit for bit: 70 channels (a partial last block), 3 images, 400 RoIs
  // of 7 x 7 bins with 2 x 2 samples (two chunks), both modes, float32 and float64.
  for (DType dtype : {kFloat32, kFloat64}) {
    for (RoiPoolMode mode : {RoiPoolMode::Avg, RoiPoolMode::Max}) {
      CAPTURE(dtype);
      CAPTURE(static_cast<int>(mode));
      const int64_t channels = 70;
      const Tensor input = random({3, channels, 9, 11}, dtype, 31);
      const Tensor rois = rois_of(random_rois(400, 3, 9, 11, 0.5, 32, dtype));
      const auto options =
          RoIAlignOptions().set_spatial_scale(0.5).set_output_size(7).set_sampling_ratio(2).set_pool_mode(mode);
      const Tensor grad = random({400, channels, 7, 7}, dtype, 33);
      Tensor x = input.clone().requires_grad_();
      const Tensor y = roi_align(x, rois, options);
      y.backward(grad);
      for (int64_t c = 0; c < channels; ++c) {
        CAPTURE(c);
        Tensor x_c = input.narrow(1, c, 1).contiguous().requires_grad_();
        const Tensor y_c = roi_align(x_c, rois, options);
        y_c.backward(grad.narrow(1, c, 1).contiguous());
        CHECK(max_abs_diff(y.detach().narrow(1, c, 1), y_c.detach()) == 0.0);
        CHECK(max_abs_diff(x.grad().narrow(1, c, 1), x_c.grad()) == 0.0);
      }
    }
  }
}

// ---- gradcheck ------------------------------------------------------------------------------------------

TEST_CASE("gradcheck/roi_align: avg mode features and boxes aligned and legacy") {
  const RandomRois r = random_rois(5, 2, 7, 8, 0.5, 11);
  for (bool aligned : {true, false}) {
    const auto options = RoIAlignOptions().set_output_size(2, 3).set_spatial_scale(0.5).set_sampling_ratio(2)
                             .set_aligned(aligned);
    gradcheck_case(aligned ? "avg aligned" : "avg legacy", random({2, 3, 7, 8}, kFloat64, 12), r, options, true);
  }
}

TEST_CASE("gradcheck/roi_align: max mode features and boxes") {
  const RandomRois r = random_rois(4, 2, 6, 7, 1.0, 13);
  for (bool aligned : {true, false}) {
    const auto options = RoIAlignOptions().set_output_size(2).set_sampling_ratio(3).set_aligned(aligned)
                             .set_pool_mode(RoiPoolMode::Max);
    gradcheck_case(aligned ? "max aligned" : "max legacy", random({2, 2, 6, 7}, kFloat64, 14), r, options, true);
  }
}

TEST_CASE("gradcheck/roi_align: adaptive sampling for the features in both modes") {
  // The adaptive grid size jumps with the box size, so only the feature gradient is checked here.
  const RandomRois r = random_rois(6, 2, 9, 8, 0.5, 15);
  for (RoiPoolMode mode : {RoiPoolMode::Avg, RoiPoolMode::Max}) {
    const auto options = RoIAlignOptions().set_output_size(2).set_spatial_scale(0.5).set_pool_mode(mode);
    gradcheck_case(mode == RoiPoolMode::Avg ? "adaptive avg" : "adaptive max", random({2, 2, 9, 8}, kFloat64, 16), r,
                   options, false);
  }
}

TEST_CASE("gradcheck/roi_align: non-contiguous input and several RoIs on one image") {
  const Tensor x = random({1, 6, 5, 2}, kFloat64, 17).permute({0, 3, 1, 2});  // (1, 2, 6, 5), NHWC storage
  const RandomRois r = random_rois(4, 1, 6, 5, 1.0, 18);
  gradcheck_case("non-contiguous", x, r, RoIAlignOptions().set_output_size(3, 2).set_sampling_ratio(2), true);
}

// ---- CUDA -----------------------------------------------------------------------------------------------

namespace {

struct CudaCase {
  std::string what;
  Shape input;
  int64_t rois;
  double scale;
  RoIAlignOptions options;
};

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
      // map. The other shapes keep the per-sample kernels covered: the staged forward (up to 128 channels)
      // and the warp-per-bin one (more channels, or a float64 tile too large), backward_map_kernel's 1, 2
      // and 4 channels per lane (max mode, 8x9 bins, and float64 maps), and the global-atomic backward where
      // no map fits.
      {"avg, 3x3 bins on a 40 x 40 map: the separable backward without a map", {1, 6, 40, 40}, 12, 0.5,
       RoIAlignOptions().set_output_size(3).set_sampling_ratio(2).set_spatial_scale(0.5)},
      {"avg, 8x9 bins (past the separable kernels' 7x7)", {2, 40, 14, 13}, 9, 0.5,
       RoIAlignOptions().set_output_size(8, 9).set_sampling_ratio(2).set_spatial_scale(0.5)},
      {"avg, 8x3 bins, 300 channels: the warp-per-bin forward", {2, 300, 9, 11}, 13, 1.0,
       RoIAlignOptions().set_output_size(8, 3).set_sampling_ratio(2)},
      {"max, 300 channels: the shared-memory backward's 4 channels per lane", {2, 300, 9, 11}, 13, 1.0,
       RoIAlignOptions().set_output_size(5, 3).set_sampling_ratio(3).set_pool_mode(M::Max)},
      {"avg, a map too large for shared memory (the global-atomic backward)", {2, 20, 90, 100}, 30, 0.5,
       RoIAlignOptions().set_sampling_ratio(2).set_spatial_scale(0.5)},
      {"max, a map too large for shared memory", {1, 6, 90, 100}, 20, 0.5,
       RoIAlignOptions().set_sampling_ratio(2).set_spatial_scale(0.5).set_pool_mode(M::Max)},
  };
}

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
  // Channel counts that leave part of a warp idle (lanes are channels), maps smaller than one tile and
  // larger than many, several images, RoIs outside, inverted and of zero size, both modes, fixed and
  // adaptive sampling, aligned and legacy boxes.
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
  };
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

// ---- errors ---------------------------------------------------------------------------------------------

TEST_CASE("errors/roi_align: every bad input names the op and what was expected") {
  const Tensor x = zeros({2, 3, 4, 4}, kFloat64);
  const Tensor ok = rois_from({0, 0, 0, 1, 1});
  CHECK_THROWS_CONTAINING(roi_align(x, zeros({3, 4}, kFloat64)), "roi_align: expected rois of shape (K, 5)");
  CHECK_THROWS_CONTAINING(roi_align(x, zeros({5}, kFloat64)), "expected rois of shape (K, 5)");
  CHECK_THROWS_CONTAINING(roi_align(x, ok.to(kFloat32)), "of the same dtype");
  CHECK_THROWS_CONTAINING(roi_align(x, rois_from({2, 0, 0, 1, 1})), "batch index 2; expected an integer in [0, 2)");
  CHECK_THROWS_CONTAINING(roi_align(x, rois_from({-1, 0, 0, 1, 1})), "batch index -1");
  CHECK_THROWS_CONTAINING(roi_align(x, rois_from({0, 0, 0, 1, 1, 1.5, 0, 0, 1, 1})), "rois row 1");
  CHECK_THROWS_CONTAINING(roi_align(x, rois_from({0, NAN, 0, 1, 1})), "expected finite coordinates");
  CHECK_THROWS_CONTAINING(roi_align(x, rois_from({0, 0, 0, INFINITY, 1})), "expected finite coordinates");
  CHECK_THROWS_CONTAINING(roi_align(x, rois_from({NAN, 0, 0, 1, 1})), "batch index");
  CHECK_THROWS_CONTAINING(roi_align(zeros({0, 3, 4, 4}, kFloat64), ok), "expected an integer in [0, 0)");
  CHECK_THROWS_CONTAINING(roi_align(x, ok, RoIAlignOptions().set_output_size(0, 2)), "expected output size >= 1");
  CHECK_THROWS_CONTAINING(roi_align(x, ok, RoIAlignOptions().set_spatial_scale(0)), "spatial_scale");
  CHECK_THROWS_CONTAINING(roi_align(x, ok, RoIAlignOptions().set_spatial_scale(NAN)), "spatial_scale");
  CHECK_THROWS_CONTAINING(roi_align(zeros({3, 4, 4}, kFloat64), ok), "expected input (N, C, H, W) with 4 dims");
  CHECK_THROWS_CONTAINING(roi_align(zeros({2, 3, 4, 4}, kInt64), ok.to(kInt64)), "float32 or float64");
  CHECK_THROWS_CONTAINING(roi_align(Tensor(), ok), "input is an undefined tensor");
  CHECK_THROWS_CONTAINING(roi_align(x, Tensor()), "rois is an undefined tensor");
}
