// BoxCoder: hand-computed encodings, the encode/decode round trip, the dw/dh clamp, class-specific decoding,
// gradient checks of decode, CUDA parity and errors.
#include <cmath>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "models/box_coder/box_coder.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using models::BoxCoder;
using minidet::test::allclose;
using minidet::test::max_abs_diff;

namespace {

// count random boxes with corners in [0, 50) and sides in [5, 45).
Tensor random_boxes(int64_t count, DType dtype, uint64_t seed) {
  Generator g(seed);
  const Tensor corner = mul(rand({count, 2}, kFloat64, &g), 50.0);
  const Tensor side = add(mul(rand({count, 2}, kFloat64, &g), 40.0), 5.0);
  return cat({corner, add(corner, side)}, 1).to(dtype);
}

// Deltas in (-scale, scale): small enough that no dw / dh reaches the clamp.
Tensor random_deltas(int64_t count, int64_t columns, DType dtype, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return mul(sub(rand({count, columns}, kFloat64, &g), 0.5), 2 * scale).to(dtype);
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace

TEST_CASE("values/box_coder: encode by hand with unit and head weights") {
  // P: w 10, h 20, centre (5, 10). G1: same size, centre (7, 14). G2: w 20, h 10, centre (10, 5).
  const Tensor reference = from_vector<double>({0, 0, 10, 20, 0, 0, 10, 20}, {2, 4});
  const Tensor target = from_vector<double>({2, 4, 12, 24, 0, 0, 20, 10}, {2, 4});
  const std::vector<double> unit = values(BoxCoder().encode(target, reference));
  const std::vector<double> expected = {0.2, 0.2, 0, 0, 0.5, -0.25, std::log(2.0), std::log(0.5)};
  for (size_t k = 0; k < expected.size(); ++k) CHECK(unit[k] == doctest::Approx(expected[k]).epsilon(1e-14));
  const std::vector<double> head = values(BoxCoder({10, 10, 5, 5}).encode(target, reference));
  const double scale[4] = {10, 10, 5, 5};
  for (size_t k = 0; k < expected.size(); ++k)
    CHECK(head[k] == doctest::Approx(expected[k] * scale[k % 4]).epsilon(1e-14));
  CHECK(BoxCoder().encode(target.view({1, 2, 4}), reference.view({1, 2, 4})).sizes() == Shape{1, 2, 4});
}

TEST_CASE("values/box_coder: decode inverts encode for both weight sets") {
  const Tensor reference = random_boxes(50, kFloat64, 1), target = random_boxes(50, kFloat64, 2);
  for (const BoxCoder& coder : {BoxCoder(), BoxCoder({10, 10, 5, 5})}) {
    const Tensor round_trip = coder.decode(coder.encode(target, reference), reference);
    CHECK(max_abs_diff(round_trip, target) < 1e-11);
  }
  // float32 too, to float32 precision.
  const BoxCoder coder({10, 10, 5, 5});
  const Tensor r32 = reference.to(kFloat32), t32 = target.to(kFloat32);
  CHECK(max_abs_diff(coder.decode(coder.encode(t32, r32), r32), t32) < 1e-4);
}

TEST_CASE("values/box_coder: decode by hand with K class-specific boxes per reference") {
  // Reference (0, 0, 10, 20); box 0: zero deltas gives the reference back; box 1: dx = 0.1 (x 10 weight = 1),
  // dw = log(2) * 5: centre moves by 0.1 * 10 = 1 and the width doubles: (6 - 10, ...).
  const BoxCoder coder({10, 10, 5, 5});
  const Tensor reference = from_vector<double>({0, 0, 10, 20}, {1, 4});
  const Tensor deltas = from_vector<double>({0, 0, 0, 0, 1, 0, 5 * std::log(2.0), 0}, {1, 8});
  const std::vector<double> boxes = values(coder.decode(deltas, reference));
  const std::vector<double> expected = {0, 0, 10, 20, -4, 0, 16, 20};
  REQUIRE(boxes.size() == 8);
  for (size_t k = 0; k < 8; ++k) CHECK(boxes[k] == doctest::Approx(expected[k]).epsilon(1e-14));
  CHECK(coder.decode(zeros({0, 8}, kFloat64), zeros({0, 4}, kFloat64)).sizes() == Shape{0, 8});
}

TEST_CASE("values/box_coder: dw and dh are clamped at log(1000/16) and the clamp stops the gradient") {
  const BoxCoder coder;  // weights 1: the clip applies to dw itself
  CHECK(coder.bbox_xform_clip() == doctest::Approx(std::log(1000.0 / 16.0)));
  const Tensor reference = from_vector<double>({0, 0, 16, 16}, {1, 4});
  const Tensor deltas = from_vector<double>({0, 0, 10, 1}, {1, 4}).requires_grad_();
  const Tensor boxes = coder.decode(deltas, reference);
  // Width 16 * exp(min(10, log 62.5)) = 1000, centred on 8; height 16 * e, not clamped.
  const std::vector<double> b = values(boxes);
  CHECK(b[0] == doctest::Approx(8 - 500));
  CHECK(b[2] == doctest::Approx(8 + 500));
  CHECK(b[3] - b[1] == doctest::Approx(16 * std::exp(1.0)));
  // Upstream (1, 2, 3, 4) on (x1, y1, x2, y2): d/d dx = (1 + 3) * Pw, d/d dy = (2 + 4) * Ph,
  // d/d dh = (-2 + 4) * h / 2 = h, and d/d dw = 0 because dw was clamped.
  boxes.backward(from_vector<double>({1, 2, 3, 4}, {1, 4}));
  const std::vector<double> g = values(deltas.grad());
  CHECK(g[0] == doctest::Approx(64));
  CHECK(g[1] == doctest::Approx(96));
  CHECK(g[2] == 0.0);
  CHECK(g[3] == doctest::Approx(16 * std::exp(1.0)));
}

TEST_CASE("gradcheck/box_coder: decode in the deltas and the reference boxes in float64") {
  const BoxCoder coder({10, 10, 5, 5});
  const Tensor deltas = random_deltas(4, 12, kFloat64, 3).requires_grad_();  // K = 3 boxes per reference
  const Tensor reference = random_boxes(4, kFloat64, 4).requires_grad_();
  const autograd::GradcheckResult r =
      autograd::gradcheck([coder](const TensorList& in) { return coder.decode(in[0], in[1]); }, {deltas, reference});
  MESSAGE("decode: max_abs_error " << r.max_abs_error);
  CHECK_MESSAGE(r.ok, r.report);
  // encode in the target boxes (it is composed of differentiable ops too).
  const Tensor target = random_boxes(4, kFloat64, 5).requires_grad_();
  const Tensor fixed = random_boxes(4, kFloat64, 6);
  const autograd::GradcheckResult e =
      autograd::gradcheck([coder, fixed](const TensorList& in) { return coder.encode(in[0], fixed); }, {target});
  MESSAGE("encode: max_abs_error " << e.max_abs_error);
  CHECK_MESSAGE(e.ok, e.report);
}

// The one-kernel form (no gradient needed) against the composed form (an input that requires grad).
void check_forms_agree(const Tensor& target, const Tensor& reference, const Tensor& deltas, double exact) {
  for (const BoxCoder& coder : {BoxCoder(), BoxCoder({10, 10, 5, 5})}) {
    const Tensor fused_encode = coder.encode(target, reference);
    const Tensor composed_encode = coder.encode(target.clone().requires_grad_(), reference).detach();
    CHECK(max_abs_diff(fused_encode.cpu(), composed_encode.cpu()) <= exact);
    const Tensor fused_decode = coder.decode(deltas, reference);
    const Tensor composed_decode = coder.decode(deltas.clone().requires_grad_(), reference).detach();
    CHECK(max_abs_diff(fused_decode.cpu(), composed_decode.cpu()) <= exact);
  }
}

TEST_CASE("values/box_coder: with no gradient needed the one-kernel form gives the composed form's bits") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor reference = random_boxes(500, dtype, 11), target = random_boxes(500, dtype, 12);
    check_forms_agree(target, reference, random_deltas(500, 12, dtype, 13, 30.0), 0.0);
  }
}

MINIDET_CUDA_TEST_CASE("cuda/box_coder: with no gradient needed the one-kernel form gives the composed form's bits") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor reference = random_boxes(500, dtype, 11).cuda(), target = random_boxes(500, dtype, 12).cuda();
    check_forms_agree(target, reference, random_deltas(500, 12, dtype, 13, 30.0).cuda(), 0.0);
  }
}

TEST_CASE("errors/box_coder: bad weights shapes dtypes and clip") {
  CHECK_THROWS_CONTAINING(BoxCoder({1, 0, 1, 1}), "BoxCoder: expected positive finite weights");
  CHECK_THROWS_CONTAINING(BoxCoder({1, 1, 1, 1}, std::nan("")), "bbox_xform_clip is NaN");
  const BoxCoder coder;
  const Tensor reference = zeros({3, 4});
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 5}), reference), "expected deltas of shape (N, 4K) with N = 3");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({2, 4}), reference), "expected deltas of shape (N, 4K)");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 0}), reference), "K >= 1");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 4}), zeros({3, 3})), "expected reference_boxes of shape (N, 4)");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 4}, kFloat64), reference), "of the same dtype");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 4}, kInt64), zeros({3, 4}, kInt64)), "float32 or float64");
  CHECK_THROWS_CONTAINING(coder.encode(zeros({2, 4}), reference), "of the same shape");
  CHECK_THROWS_CONTAINING(coder.encode(zeros({3, 2}), reference), "expected target_boxes of shape (..., 4)");
}

MINIDET_CUDA_TEST_CASE("errors/box_coder: deltas and boxes on different devices") {
  CHECK_THROWS_CONTAINING(BoxCoder().decode(zeros({3, 4}, Device::cuda()), zeros({3, 4})), "on the same device");
}

MINIDET_CUDA_TEST_CASE("cuda/box_coder: encode decode and the decode gradients match the CPU") {
  const BoxCoder coder({10, 10, 5, 5});
  const Tensor reference = random_boxes(300, kFloat32, 7), target = random_boxes(300, kFloat32, 8);
  // A few deltas far past the clamp, so both sides of it are compared.
  const Tensor deltas = random_deltas(300, 8, kFloat32, 9, 30.0);
  Generator g(10);
  const Tensor upstream = randn({300, 8}, kFloat32, &g);
  CHECK(allclose(coder.encode(target.cuda(), reference.cuda()).cpu(), coder.encode(target, reference), 1e-5, 1e-5));
  TensorList results[2];
  for (int device = 0; device < 2; ++device) {
    const Tensor d = (device ? deltas.cuda() : deltas.clone()).requires_grad_();
    const Tensor r = (device ? reference.cuda() : reference.clone()).requires_grad_();
    const Tensor boxes = coder.decode(d, r);
    CHECK(boxes.device() == d.device());
    boxes.backward(upstream.to(boxes.device()));
    results[device] = {boxes.detach().cpu(), d.grad().cpu(), r.grad().cpu()};
  }
  // exp differs by an ulp or two between the host's libm and CUDA's: relative tolerances.
  CHECK(allclose(results[1][0], results[0][0], 1e-5, 1e-3));
  CHECK(allclose(results[1][1], results[0][1], 1e-5, 1e-3));
  CHECK(allclose(results[1][2], results[0][2], 1e-5, 1e-3));
}
