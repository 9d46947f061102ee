// roi_align: hand-computed cases, the edge-case policy, the separable form's identities, float64 gradient
// checks of both gradients (features and box coordinates), and every validation error. The CUDA kernels are
// tested against these in test_roi_align_cuda.cpp.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/roi_align/roi_align.h"
#include "ops/roi_align/roi_align_kernels.h"  // RoiAlignGeometry, roi_box: the separable identities
#include "ops/roi_align/roi_align_separable.h"
#include "ops/shape/cat.h"
#include "tests/ops/roi_align_inputs.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using minidet::test::max_abs_diff;
using namespace minidet::test::roi_align_inputs;

namespace {

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
