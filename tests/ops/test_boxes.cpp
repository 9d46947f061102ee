// Box ops: box_iou (fused kernels), box_area, clip_boxes_to_image, remove_small_boxes, the xyxy <-> cxcywh
// conversions, and the shared box_math arithmetic.
#include <cmath>
#include <functional>
#include <utility>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/boxes/box_math.h"
#include "ops/boxes/boxes.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using minidet::test::allclose;
using minidet::test::max_abs_diff;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// count random boxes (x1, y1, x1 + w, y1 + h), corners in [0, span), sides in [min_side, min_side + side_range).
Tensor random_boxes(int64_t count, DType dtype, uint64_t seed, double span = 4, double min_side = 2,
                    double side_range = 4) {
  Generator g(seed);
  const Tensor corner = mul(rand({count, 2}, kFloat64, &g), span);
  const Tensor side = add(mul(rand({count, 2}, kFloat64, &g), side_range), min_side);
  return cat({corner, add(corner, side)}, 1).to(dtype);
}

void expect_gradcheck(const char* what, const autograd::GradcheckFn& fn, const TensorList& inputs) {
  const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs);
  CHECK_MESSAGE(r.ok, std::string(what) << ": " << r.report);
  MESSAGE(std::string(what) << ": max_abs_error " << r.max_abs_error);
}

Tensor upstream(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

}  // namespace

// ---- box_math -----------------------------------------------------------------------------------------

TEST_CASE("values/box_math: area intersection and IoU with and without the legacy offset") {
  const double a[4] = {0, 0, 2, 2}, b[4] = {1, 1, 3, 3}, dot[4] = {1, 1, 1, 1}, inverted[4] = {3, 3, 1, 1};
  CHECK(box_math::box_area(a) == 4.0);
  CHECK(box_math::box_area(a, 1.0) == 9.0);  // 3 x 3 pixels counted inclusively
  CHECK(box_math::box_area(inverted) == 0.0);
  CHECK(box_math::intersection_area(a, b) == 1.0);
  CHECK(box_math::box_iou(a, b) == doctest::Approx(1.0 / 7.0));
  CHECK(box_math::box_iou(a, b, 1.0) == doctest::Approx(4.0 / 14.0));  // 2x2 overlap, 9 + 9 - 4
  // Zero-area policy: 0, never NaN, even for a zero-area box against itself.
  CHECK(box_math::box_iou(dot, dot) == 0.0);
  CHECK(box_math::box_iou(inverted, inverted) == 0.0);
  CHECK(box_math::box_iou(dot, dot, 1.0) == 1.0);  // with +1 the dot is a 1 x 1 pixel
  const float af[4] = {0, 0, 2, 2}, bf[4] = {1, 1, 3, 3};
  CHECK(box_math::box_iou(af, bf) == 1.0f / 7.0f);
}

// ---- box_iou ------------------------------------------------------------------------------------------

TEST_CASE("values/box_iou: overlapping contained disjoint touching and zero-area boxes by hand") {
  const Tensor a = from_vector<double>({0, 0, 2, 2, 1, 1, 3, 3}, {2, 4});
  const Tensor b = from_vector<double>({1, 1, 3, 3,        // overlaps a0 by 1x1; equals a1
                                       0, 0, 1, 1,        // inside a0; touches a1 at a corner
                                       5, 5, 6, 6,        // disjoint from both
                                       0.5, 0.5, 1.5, 1.5,  // inside a0; overlaps a1 by 0.5x0.5
                                       2, 0, 2, 4},       // zero width, on a0's right edge
                                      {5, 4});
  const Tensor iou = box_iou(a, b);
  CHECK(iou.sizes() == Shape{2, 5});
  const std::vector<double> expected = {1.0 / 7, 0.25, 0, 0.25, 0,  // a0
                                        1, 0, 0, 0.25 / 4.75, 0};    // a1
  const std::vector<double> got = iou.to_vector<double>();
  for (size_t k = 0; k < expected.size(); ++k) CHECK(got[k] == doctest::Approx(expected[k]).epsilon(1e-15));
  // Two identical zero-area boxes: 0, not 0/0.
  const Tensor dot = from_vector<double>({1, 1, 1, 1}, {1, 4});
  CHECK(box_iou(dot, dot).item<double>() == 0.0);
  // float32 gives the same as box_math, bit for bit.
  const float af[4] = {0, 0, 2, 2}, bf[4] = {0.5f, 0.5f, 1.5f, 1.5f};
  CHECK(box_iou(a.to(kFloat32), b.to(kFloat32)).to_vector<float>()[3] == box_math::box_iou(af, bf));
}

TEST_CASE("values/box_iou: hand-derived gradients and the half split on a shared edge") {
  // IoU((0,0,t,2), (1,1,3,3)) = (t-1)/(t+5): d/dt = 6/49 at t = 2. IoU((s,0,2,2), .) = 1/(7-2s): d/ds = 2/49.
  const Tensor a = from_vector<double>({0, 0, 2, 2}, {1, 4}).requires_grad_();
  const Tensor b = from_vector<double>({1, 1, 3, 3}, {1, 4}).requires_grad_();
  box_iou(a, b).backward(ones({1, 1}, kFloat64));
  const std::vector<double> ga = a.grad().to_vector<double>();
  CHECK(ga[2] == doctest::Approx(6.0 / 49));
  CHECK(ga[0] == doctest::Approx(2.0 / 49));
  CHECK(ga[1] == doctest::Approx(2.0 / 49));  // symmetric along y
  CHECK(ga[3] == doctest::Approx(6.0 / 49));
  // Identical boxes: every edge is tied, each box gets half, and the IoU stays 1 to first order along the
  // tied edges' common motion: moving a.x2 alone by +e changes nothing to first order (I and U both grow).
  const Tensor c = from_vector<double>({0, 0, 2, 2}, {1, 4}).requires_grad_();
  const Tensor d = from_vector<double>({0, 0, 2, 2}, {1, 4}).requires_grad_();
  box_iou(c, d).backward(ones({1, 1}, kFloat64));
  CHECK(c.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0});
  CHECK(d.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0});
  // Disjoint boxes: IoU is the constant 0 around them, so no gradient.
  const Tensor e = from_vector<double>({0, 0, 1, 1}, {1, 4}).requires_grad_();
  box_iou(e, from_vector<double>({5, 5, 6, 6}, {1, 4})).backward(ones({1, 1}, kFloat64));
  CHECK(e.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0});
}

TEST_CASE("values/box_iou: NaN coordinates give NaN IoUs for their box only") {
  const Tensor a = from_vector<double>({0, 0, 2, 2, kNaN, 0, 2, 2}, {2, 4});
  const Tensor b = from_vector<double>({1, 1, 3, 3}, {1, 4});
  const std::vector<double> iou = box_iou(a, b).to_vector<double>();
  CHECK(iou[0] == doctest::Approx(1.0 / 7));
  CHECK(std::isnan(iou[1]));
}

TEST_CASE("values/box_iou: empty sets give empty matrices and zero gradients") {
  const Tensor a = zeros({0, 4}, kFloat64).requires_grad_();
  const Tensor b = random_boxes(3, kFloat64, 1).requires_grad_();
  const Tensor iou = box_iou(a, b);
  CHECK(iou.sizes() == Shape{0, 3});
  iou.backward(zeros({0, 3}, kFloat64));
  CHECK(b.grad().sizes() == Shape{3, 4});
  CHECK(b.grad().to_vector<double>() == std::vector<double>(12, 0.0));
  CHECK(box_iou(b, zeros({0, 4}, kFloat64)).sizes() == Shape{3, 0});
}

TEST_CASE("gradcheck/box_iou: random overlapping boxes in float64") {
  const Tensor a = random_boxes(6, kFloat64, 11).requires_grad_();
  const Tensor b = random_boxes(5, kFloat64, 12).requires_grad_();
  expect_gradcheck("box_iou", [](const TensorList& in) { return box_iou(in[0], in[1]); }, {a, b});
}

TEST_CASE("gradcheck/box_iou: non-contiguous boxes and one side constant") {
  // boxes1 read through a transpose of a (4, N) buffer.
  const Tensor a = random_boxes(5, kFloat64, 13).t().contiguous().t().requires_grad_();
  REQUIRE(!a.is_contiguous());
  const Tensor b = random_boxes(7, kFloat64, 14);
  expect_gradcheck("box_iou non-contiguous", [b](const TensorList& in) { return box_iou(in[0], b); }, {a});
}

TEST_CASE("errors/box_iou: bad shapes dtypes and mismatches") {
  const Tensor ok = zeros({3, 4});
  CHECK_THROWS_CONTAINING(box_iou(zeros({3, 5}), ok), "box_iou: expected boxes1 of shape (N, 4)");
  CHECK_THROWS_CONTAINING(box_iou(ok, zeros({2, 3})), "box_iou: expected boxes2 of shape (M, 4)");
  CHECK_THROWS_CONTAINING(box_iou(zeros({4}), ok), "expected boxes1 (N, 4) with 2 dims");
  CHECK_THROWS_CONTAINING(box_iou(ok, zeros({2, 2, 4})), "expected boxes2 (M, 4) with 2 dims");
  CHECK_THROWS_CONTAINING(box_iou(zeros({3, 4}, kInt64), ok), "float32 or float64");
  CHECK_THROWS_CONTAINING(box_iou(ok, zeros({3, 4}, kFloat64)), "of the same dtype");
  CHECK_THROWS_CONTAINING(box_iou(Tensor(), ok), "box_iou: boxes1 is an undefined tensor");
}

MINIDET_CUDA_TEST_CASE("errors/box_iou: boxes on different devices") {
  CHECK_THROWS_CONTAINING(box_iou(zeros({3, 4}), zeros({3, 4}, Device::cuda())), "on the same device");
}

MINIDET_CUDA_TEST_CASE("cuda/box_iou: forward bit-identical and gradients close to the CPU") {
  // Sizes that cross the 64 x 32 backward tiles unevenly; duplicates, a zero-area box and far boxes so that
  // ties, zero-area and disjoint pairs all occur.
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    Tensor a = random_boxes(301, dtype, 21, 40, 1, 30);
    Tensor b = random_boxes(170, dtype, 22, 40, 1, 30);
    a = cat({a, b.narrow(0, 0, 20), from_vector<double>({5, 5, 5, 9, 500, 500, 510, 510}, {2, 4}).to(dtype)}, 0);
    b = cat({b, from_vector<double>({5, 5, 5, 9}, {1, 4}).to(dtype)}, 0);
    const Tensor g = upstream({a.size(0), b.size(0)}, dtype, 23);
    TensorList results[2];
    for (int device = 0; device < 2; ++device) {
      const Tensor da = (device ? a.cuda() : a.clone()).requires_grad_();
      const Tensor db = (device ? b.cuda() : b.clone()).requires_grad_();
      const Tensor iou = box_iou(da, db);
      iou.backward(g.to(iou.device()));
      results[device] = {iou.detach().cpu(), da.grad().cpu(), db.grad().cpu()};
    }
    // box_math rounds every operation explicitly, so the IoUs agree to the last bit.
    CHECK(max_abs_diff(results[1][0], results[0][0]) == 0.0);
    const double tol = dtype == kFloat32 ? 1e-4 : 1e-10;
    CHECK(allclose(results[1][1], results[0][1], tol, tol));
    CHECK(allclose(results[1][2], results[0][2], tol, tol));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/box_iou: backward gives identical bits twice and handles empty sets") {
  const Tensor a = random_boxes(1000, kFloat32, 31, 100, 5, 60).cuda().requires_grad_();
  const Tensor b = random_boxes(77, kFloat32, 32, 100, 5, 60).cuda().requires_grad_();
  const Tensor g = upstream({1000, 77}, kFloat32, 33).cuda();
  box_iou(a, b).backward(g);
  const std::vector<float> first_a = a.grad().to_vector<float>(), first_b = b.grad().to_vector<float>();
  a.set_grad(Tensor());
  b.set_grad(Tensor());
  box_iou(a, b).backward(g);
  CHECK(a.grad().to_vector<float>() == first_a);
  CHECK(b.grad().to_vector<float>() == first_b);
  const Tensor none = zeros({0, 4}, Device::cuda()).requires_grad_();
  const Tensor iou = box_iou(none, b);
  CHECK(iou.sizes() == Shape{0, 77});
  CHECK(iou.is_cuda());
}

// ---- box_area -----------------------------------------------------------------------------------------

TEST_CASE("values/box_area: areas of normal zero-width and inverted boxes and their gradients") {
  const Tensor boxes = from_vector<double>({0, 0, 2, 3, 1, 1, 1, 5, 3, 3, 1, 1}, {3, 4}).requires_grad_();
  const Tensor area = box_area(boxes);
  CHECK(area.sizes() == Shape{3});
  CHECK(area.to_vector<double>() == std::vector<double>{6, 0, 0});
  area.backward(ones({3}, kFloat64));
  CHECK(boxes.grad().to_vector<double>() == std::vector<double>{-3, -2, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0});
  // Any leading shape; bit-identical to box_math (so box_iou, nms and box_area measure boxes alike).
  const Tensor many = random_boxes(24, kFloat32, 3).view({2, 3, 4, 4});
  const Tensor areas = box_area(many);
  CHECK(areas.sizes() == Shape{2, 3, 4});
  const std::vector<float> coords = many.to_vector<float>(), got = areas.to_vector<float>();
  for (size_t k = 0; k < got.size(); ++k) CHECK(got[k] == box_math::box_area(&coords[4 * k]));
  CHECK(box_area(zeros({0, 4})).sizes() == Shape{0});
}

TEST_CASE("gradcheck/box_area: random boxes with leading dims in float64") {
  const Tensor boxes = random_boxes(6, kFloat64, 41).view({2, 3, 4}).requires_grad_();
  expect_gradcheck("box_area", [](const TensorList& in) { return box_area(in[0]); }, {boxes});
}

TEST_CASE("errors/box_area: bad last dim and dtype") {
  CHECK_THROWS_CONTAINING(box_area(zeros({3, 5})), "box_area: expected boxes of shape (..., 4)");
  CHECK_THROWS_CONTAINING(box_area(zeros({3, 4}, kInt64)), "box_area: expected boxes to be float32 or float64");
  CHECK_THROWS_CONTAINING(box_area(scalar_tensor(1.0)), "expected boxes of shape (..., 4)");
}

// ---- clip_boxes_to_image --------------------------------------------------------------------------------

TEST_CASE("values/clip_boxes_to_image: x to the width and y to the height with gradients only inside") {
  const Tensor boxes = from_vector<double>({-1, 2, 5, 12, 3, -4, 20, 6}, {2, 4}).requires_grad_();
  const Tensor clipped = clip_boxes_to_image(boxes, /*height=*/10, /*width=*/8);
  CHECK(clipped.sizes() == Shape{2, 4});
  CHECK(clipped.to_vector<double>() == std::vector<double>{0, 2, 5, 10, 3, 0, 8, 6});
  clipped.backward(from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}));
  CHECK(boxes.grad().to_vector<double>() == std::vector<double>{0, 2, 3, 0, 5, 0, 0, 8});
  CHECK(clip_boxes_to_image(zeros({0, 4}), 5, 5).sizes() == Shape{0, 4});
  CHECK(clip_boxes_to_image(zeros({2, 3, 4}), 5, 5).sizes() == Shape{2, 3, 4});
}

TEST_CASE("gradcheck/clip_boxes_to_image: boxes partly outside the image in float64") {
  // Corners in [-3, 9) with the image 6 x 7: coordinates land on both sides of every bound, never on one.
  const Tensor boxes = add(random_boxes(8, kFloat64, 51, 9, 1, 5), -3.0).requires_grad_();
  expect_gradcheck("clip_boxes_to_image", [](const TensorList& in) { return clip_boxes_to_image(in[0], 6.0, 7.0); },
                   {boxes});
}

TEST_CASE("errors/clip_boxes_to_image: bad shape dtype and image size") {
  CHECK_THROWS_CONTAINING(clip_boxes_to_image(zeros({3, 2}), 5, 5), "clip_boxes_to_image: expected boxes of shape");
  CHECK_THROWS_CONTAINING(clip_boxes_to_image(zeros({3, 4}, kInt64), 5, 5), "float32 or float64");
  CHECK_THROWS_CONTAINING(clip_boxes_to_image(zeros({3, 4}), -1, 5), "expected a finite image size");
  CHECK_THROWS_CONTAINING(clip_boxes_to_image(zeros({3, 4}), 5, kNaN), "expected a finite image size");
}

// ---- remove_small_boxes ---------------------------------------------------------------------------------

TEST_CASE("values/remove_small_boxes: both sides at least min_size and NaN removed") {
  const Tensor boxes = from_vector<double>({0, 0, 1, 1,        // exactly min_size: kept
                                           0, 0, 0.5, 2,      // too narrow
                                           0, 0, 2, 0.4,      // too short
                                           1, 1, 3, 3,        // kept
                                           kNaN, 0, 5, 5,     // NaN: removed
                                           3, 3, 1, 1},       // inverted: removed
                                          {6, 4});
  const Tensor keep = remove_small_boxes(boxes, 1.0);
  CHECK(keep.dtype() == kInt64);
  CHECK(keep.to_vector<int64_t>() == std::vector<int64_t>{0, 3});
  CHECK(remove_small_boxes(boxes.to(kFloat32), 0.0).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(remove_small_boxes(zeros({0, 4}), 1.0).sizes() == Shape{0});
}

TEST_CASE("errors/remove_small_boxes: bad shapes dtype and min_size") {
  CHECK_THROWS_CONTAINING(remove_small_boxes(zeros({2, 3, 4}), 1), "remove_small_boxes: expected boxes of shape (N, 4)");
  CHECK_THROWS_CONTAINING(remove_small_boxes(zeros({3, 5}), 1), "expected boxes of shape (N, 4)");
  CHECK_THROWS_CONTAINING(remove_small_boxes(zeros({3, 4}, kInt64), 1), "float32 or float64");
  CHECK_THROWS_CONTAINING(remove_small_boxes(zeros({3, 4}), kNaN), "min_size is NaN");
}

// ---- conversions ----------------------------------------------------------------------------------------

TEST_CASE("values/box_convert: xyxy to cxcywh and back by hand") {
  const Tensor xyxy = from_vector<double>({1, 2, 5, 8, -2, -2, 2, 0}, {2, 4});
  const Tensor cxcywh = box_xyxy_to_cxcywh(xyxy);
  CHECK(cxcywh.to_vector<double>() == std::vector<double>{3, 5, 4, 6, 0, -1, 4, 2});
  CHECK(box_cxcywh_to_xyxy(cxcywh).to_vector<double>() == xyxy.to_vector<double>());
  // The gradient of xyxy -> cxcywh: d/dx1 = dcx / 2 - dw, d/dx2 = dcx / 2 + dw.
  const Tensor leaf = xyxy.narrow(0, 0, 1).clone().requires_grad_();
  box_xyxy_to_cxcywh(leaf).backward(from_vector<double>({1, 2, 3, 4}, {1, 4}));
  CHECK(leaf.grad().to_vector<double>() == std::vector<double>{-2.5, -3, 3.5, 5});
  CHECK(box_xyxy_to_cxcywh(zeros({0, 4})).sizes() == Shape{0, 4});
  CHECK(box_cxcywh_to_xyxy(zeros({2, 3, 4})).sizes() == Shape{2, 3, 4});
}

TEST_CASE("gradcheck/box_convert: both directions in float64") {
  const Tensor boxes = random_boxes(5, kFloat64, 61).view({5, 1, 4}).requires_grad_();
  expect_gradcheck("box_xyxy_to_cxcywh", [](const TensorList& in) { return box_xyxy_to_cxcywh(in[0]); }, {boxes});
  expect_gradcheck("box_cxcywh_to_xyxy", [](const TensorList& in) { return box_cxcywh_to_xyxy(in[0]); }, {boxes});
}

TEST_CASE("errors/box_convert: bad last dim and dtype") {
  CHECK_THROWS_CONTAINING(box_xyxy_to_cxcywh(zeros({2, 3})), "box_xyxy_to_cxcywh: expected boxes of shape (..., 4)");
  CHECK_THROWS_CONTAINING(box_cxcywh_to_xyxy(zeros({2, 4}, kInt64)), "box_cxcywh_to_xyxy: expected boxes to be float32");
}

MINIDET_CUDA_TEST_CASE("cuda/box_ops: area clip conversions and remove_small_boxes match the CPU") {
  const Tensor boxes = add(random_boxes(200, kFloat32, 71, 30, 0.2, 10), -5.0);
  const Tensor g4 = upstream({200, 4}, kFloat32, 72), g1 = upstream({200}, kFloat32, 73);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"box_area", [](const Tensor& b) { return box_area(b); }},
      {"clip_boxes_to_image", [](const Tensor& b) { return clip_boxes_to_image(b, 20, 25); }},
      {"box_xyxy_to_cxcywh", [](const Tensor& b) { return box_xyxy_to_cxcywh(b); }},
      {"box_cxcywh_to_xyxy", [](const Tensor& b) { return box_cxcywh_to_xyxy(b); }},
  };
  for (const auto& [name, op] : ops) {
    CAPTURE(name);
    TensorList results[2];
    for (int device = 0; device < 2; ++device) {
      const Tensor b = (device ? boxes.cuda() : boxes.clone()).requires_grad_();
      const Tensor y = op(b);
      y.backward((y.dim() == 1 ? g1 : g4).to(y.device()));
      results[device] = {y.detach().cpu(), b.grad().cpu()};
    }
    CHECK(max_abs_diff(results[1][0], results[0][0]) == 0.0);  // one rounding per elementwise op on both
    CHECK(allclose(results[1][1], results[0][1], 1e-6, 1e-6));
  }
  const Tensor kept_cuda = remove_small_boxes(boxes.cuda(), 3.0);
  CHECK(kept_cuda.is_cuda());
  CHECK(kept_cuda.to_vector<int64_t>() == remove_small_boxes(boxes, 3.0).to_vector<int64_t>());
  CHECK(remove_small_boxes(boxes, 3.0).numel() > 0);
}
