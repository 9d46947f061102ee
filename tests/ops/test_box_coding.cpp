// encode_boxes / decode_boxes: values by hand, the round trip, the clamp, empty and non-contiguous inputs,
// CUDA parity, and errors. That they give BoxCoder's composed bits is tested with BoxCoder
// (tests/models/test_box_coder.cpp).
#include <cmath>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "ops/box_coding/box_coding.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"
#include "tests/support.h"

using namespace minidet;
using minidet::test::allclose;
using minidet::test::max_abs_diff;

namespace {

const std::array<double, 4> kUnit = {1, 1, 1, 1}, kHead = {10, 10, 5, 5};
const double kClip = std::log(1000.0 / 16);

// count random boxes with corners in [0, 50) and sides in [5, 45).
Tensor random_boxes(int64_t count, DType dtype, uint64_t seed) {
  Generator g(seed);
  const Tensor corner = mul(rand({count, 2}, kFloat64, &g), 50.0);
  const Tensor side = add(mul(rand({count, 2}, kFloat64, &g), 40.0), 5.0);
  return cat({corner, add(corner, side)}, 1).to(dtype);
}

}  // namespace

TEST_CASE("values/box_coding: encode and decode by hand") {
  // Target (2, 4, 10, 8) against reference (0, 0, 4, 4): centres (6, 6) and (2, 2), sizes (8, 4) and (4, 4).
  const Tensor target = from_vector<double>({2, 4, 10, 8}, {1, 4});
  const Tensor reference = from_vector<double>({0, 0, 4, 4}, {1, 4});
  const std::vector<double> unit = encode_boxes(target, reference, kUnit).to_vector<double>();
  CHECK(unit[0] == doctest::Approx(1.0));            // (6 - 2) / 4
  CHECK(unit[1] == doctest::Approx(1.0));
  CHECK(unit[2] == doctest::Approx(std::log(2.0)));  // log(8 / 4)
  CHECK(unit[3] == doctest::Approx(0.0));
  const std::vector<double> head = encode_boxes(target, reference, kHead).to_vector<double>();
  CHECK(head[0] == doctest::Approx(10.0));
  CHECK(head[2] == doctest::Approx(5 * std::log(2.0)));
  // Decoding gives the target back, for each of K = 2 boxes per reference.
  const Tensor deltas = cat({encode_boxes(target, reference, kHead), zeros({1, 4}, kFloat64)}, 1);
  const std::vector<double> boxes = decode_boxes(deltas, reference, kHead, kClip).to_vector<double>();
  const std::vector<double> expected = {2, 4, 10, 8, 0, 0, 4, 4};
  for (size_t i = 0; i < expected.size(); ++i) CHECK(boxes[i] == doctest::Approx(expected[i]));
}

TEST_CASE("values/box_coding: decode inverts encode and clamps dw and dh at clip") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor reference = random_boxes(200, dtype, 1), target = random_boxes(200, dtype, 2);
    const Tensor back = decode_boxes(encode_boxes(target, reference, kHead), reference, kHead, kClip);
    CHECK(allclose(back, target, 1e-5, 1e-4));
  }
  // dw / ww = 100 is clamped to clip: the width becomes exp(clip) = 62.5 times the reference's.
  const Tensor reference = from_vector<double>({0, 0, 2, 2}, {1, 4});
  const std::vector<double> box =
      decode_boxes(from_vector<double>({0, 0, 500, 0}, {1, 4}), reference, kHead, kClip).to_vector<double>();
  CHECK(box[2] - box[0] == doctest::Approx(2 * 62.5));
  CHECK(box[3] - box[1] == doctest::Approx(2.0));
}

TEST_CASE("values/box_coding: empty and non-contiguous inputs") {
  CHECK(encode_boxes(zeros({0, 4}), zeros({0, 4}), kUnit).sizes() == Shape{0, 4});
  CHECK(decode_boxes(zeros({0, 8}), zeros({0, 4}), kUnit, kClip).sizes() == Shape{0, 8});
  // Boxes read through a transpose, and (..., 4) batches of any rank.
  const Tensor reference = random_boxes(12, kFloat32, 3), target = random_boxes(12, kFloat32, 4);
  const Tensor strided = target.t().contiguous().t();
  CHECK(!strided.is_contiguous());
  CHECK(max_abs_diff(encode_boxes(strided, reference, kUnit), encode_boxes(target, reference, kUnit)) == 0.0);
  CHECK(max_abs_diff(encode_boxes(target.view({3, 4, 4}), reference.view({3, 4, 4}), kUnit).view({12, 4}),
                     encode_boxes(target, reference, kUnit)) == 0.0);
}

TEST_CASE("errors/box_coding: shapes dtypes weights clip and inputs that require grad") {
  const Tensor boxes = zeros({3, 4});
  CHECK_THROWS_CONTAINING(encode_boxes(zeros({2, 4}), boxes, kUnit), "of the same shape");
  CHECK_THROWS_CONTAINING(encode_boxes(zeros({3, 3}), boxes, kUnit), "expected target_boxes of shape (..., 4)");
  CHECK_THROWS_CONTAINING(encode_boxes(boxes, zeros({3, 4}, kFloat64), kUnit), "of the same dtype");
  CHECK_THROWS_CONTAINING(encode_boxes(boxes, boxes, {1, 1, -1, 1}), "expected positive finite weights");
  CHECK_THROWS_CONTAINING(decode_boxes(zeros({3, 5}), boxes, kUnit, kClip), "expected deltas of shape (N, 4K)");
  CHECK_THROWS_CONTAINING(decode_boxes(zeros({2, 4}), boxes, kUnit, kClip), "with N = 3");
  CHECK_THROWS_CONTAINING(decode_boxes(zeros({3, 4}, kInt64), boxes, kUnit, kClip), "float32 or float64");
  CHECK_THROWS_CONTAINING(decode_boxes(boxes, boxes, kUnit, std::nan("")), "decode_boxes: clip is NaN");
  const Tensor leaf = zeros({3, 4}).requires_grad_();
  CHECK_THROWS_CONTAINING(encode_boxes(leaf, boxes, kUnit), "encode_boxes: not differentiable");
  CHECK_THROWS_CONTAINING(decode_boxes(boxes, leaf, kUnit, kClip), "decode_boxes: not differentiable");
  NoGradGuard no_grad;  // with grad mode off, a leaf that requires grad is only data
  CHECK(decode_boxes(boxes, leaf, kUnit, kClip).sizes() == Shape{3, 4});
}

MINIDET_CUDA_TEST_CASE("cuda/box_coding: encode and decode match the CPU") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor reference = random_boxes(3000, dtype, 5), target = random_boxes(3000, dtype, 6);
    Generator g(7);
    // Deltas up to +-30: past the clamp, so both of its sides are compared.
    const Tensor deltas = mul(sub(rand({3000, 12}, kFloat64, &g), 0.5), 60.0).to(dtype);
    // exp and log may differ by an ulp between the host's libm and CUDA's: relative tolerances.
    CHECK(allclose(encode_boxes(target.cuda(), reference.cuda(), kHead).cpu(), encode_boxes(target, reference, kHead),
                   1e-5, 1e-5));
    CHECK(allclose(decode_boxes(deltas.cuda(), reference.cuda(), kUnit, kClip).cpu(),
                   decode_boxes(deltas, reference, kUnit, kClip), 1e-5, 1e-3));
  }
  CHECK(decode_boxes(zeros({0, 4}, Device::cuda()), zeros({0, 4}, Device::cuda()), kUnit, kClip).sizes() ==
        Shape{0, 4});
}

MINIDET_CUDA_TEST_CASE("errors/box_coding: inputs on different devices") {
  CHECK_THROWS_CONTAINING(encode_boxes(zeros({3, 4}, Device::cuda()), zeros({3, 4}), kUnit), "on the same device");
}
