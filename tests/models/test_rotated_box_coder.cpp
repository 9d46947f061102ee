// RotatedBoxCoder and normalize_angle: the angle range, hand-computed encodings, the wrap of the angle
// difference, the encode/decode round trip, agreement with BoxCoder at angle 0, the dw/dh clip, empty inputs,
// gradient checks of decode and encode, errors and CUDA parity.
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "models/box_coder/box_coder.h"
#include "models/box_coder/rotated_box_coder.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using models::BoxCoder;
using models::RotatedBoxCoder;
using models::OffsetFrame;
using minidet::test::allclose;
using minidet::test::max_abs_diff;

namespace {

constexpr double kPi = 3.14159265358979323846;

// count random rotated boxes: centres in [0, 100), sides in [5, 45), angles in [angle_low, angle_high).
Tensor random_rotated_boxes(int64_t count, DType dtype, uint64_t seed, double angle_low = -kPi / 2,
                            double angle_high = kPi / 2) {
  Generator g(seed);
  const Tensor centre = mul(rand({count, 2}, kFloat64, &g), 100.0);
  const Tensor side = add(mul(rand({count, 2}, kFloat64, &g), 40.0), 5.0);
  const Tensor angle = add(mul(rand({count, 1}, kFloat64, &g), angle_high - angle_low), angle_low);
  return cat({centre, side, angle}, 1).to(dtype);
}

// Deltas in (-scale, scale) for every column (the angle's too).
Tensor random_deltas(int64_t count, int64_t columns, DType dtype, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return mul(sub(rand({count, columns}, kFloat64, &g), 0.5), 2 * scale).to(dtype);
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// (cx, cy, w, h, a) rows to BoxCoder's (x1, y1, x2, y2), the angle dropped.
Tensor to_xyxy(const Tensor& rotated) {
  const Tensor cx = select(rotated, -1, 0), cy = select(rotated, -1, 1);
  const Tensor half_w = mul(select(rotated, -1, 2), 0.5), half_h = mul(select(rotated, -1, 3), 0.5);
  return stack({sub(cx, half_w), sub(cy, half_h), add(cx, half_w), add(cy, half_h)}, -1);
}

// How far apart two angles are as box angles (modulo pi): 0 when they describe the same box.
double angle_gap(double x, double y) { return std::abs(models::normalize_angle(x - y)); }

bool in_range(double a) { return a >= -kPi / 2 && a < kPi / 2; }

}  // namespace

TEST_CASE("values/rotated_box_coder: normalize_angle maps every angle to -pi/2 <= a < pi/2 and its twins agree") {
  // The range is closed at -pi/2 and open at pi/2: a half turn either way is -pi/2.
  const std::vector<double> in = {0.0, -kPi / 2, kPi / 2, kPi, -kPi, 3.0, 0.9 * kPi, -7.5, 100.0, 1.0};
  const std::vector<double> expected = {0.0, -kPi / 2, -kPi / 2, 0.0, 0.0, 3.0 - kPi, -0.1 * kPi,
                                        -7.5 + 2 * kPi, 100.0 - 32 * kPi, 1.0};
  const std::vector<double> out = values(models::normalize_angle(from_vector<double>(in)));
  REQUIRE(out.size() == expected.size());
  for (size_t k = 0; k < in.size(); ++k) {
    CAPTURE(in[k]);
    CHECK(out[k] == doctest::Approx(expected[k]).epsilon(1e-12));
    CHECK(models::normalize_angle(in[k]) == out[k]);  // the scalar twin: the same float64 bits
    CHECK(in_range(out[k]));
  }
  CHECK(models::normalize_angle(kPi / 2) == -kPi / 2);
  CHECK(models::normalize_angle(-kPi / 2) == -kPi / 2);
  // Many angles over several turns: in range, the same bits as the scalar twin, the same box.
  Generator g(1);
  const Tensor angles = mul(sub(rand({2000}, kFloat64, &g), 0.5), 40.0);
  const std::vector<double> a = values(angles), wrapped = values(models::normalize_angle(angles));
  for (size_t k = 0; k < a.size(); ++k) {
    CHECK(wrapped[k] == models::normalize_angle(a[k]));
    CHECK(in_range(wrapped[k]));
    CHECK(std::abs(std::sin(2 * wrapped[k]) - std::sin(2 * a[k])) < 1e-12);
    CHECK(std::abs(std::cos(2 * wrapped[k]) - std::cos(2 * a[k])) < 1e-12);
  }
  // float32 agrees to float32 precision (a float near a wrap point may wrap the other way: none here).
  CHECK(max_abs_diff(models::normalize_angle(angles.to(kFloat32)), models::normalize_angle(angles)) < 1e-5);
  CHECK(models::normalize_angle(zeros({0, 3})).sizes() == Shape{0, 3});
}

TEST_CASE("values/rotated_box_coder: normalize_angle has gradient 1 away from the wrap points") {
  Tensor a = from_vector<double>({-1.2, 0.3, 2.0, -4.0, 10.0}).requires_grad_();
  models::normalize_angle(a).backward(from_vector<double>({1, 2, 3, 4, 5}));
  CHECK(values(a.grad()) == std::vector<double>{1, 2, 3, 4, 5});
}

TEST_CASE("values/rotated_box_coder: encode by hand with unit and head weights") {
  // Pair 1: P centre (10, 20), 8 x 4, angle 0.1; G centre (12, 19), 16 x 2, angle 0.3.
  // Pair 2: P centre (0, 0), 10 x 20, angle -1.4; G centre (5, -10), same size, angle 1.4: the difference
  //         2.8 is more than a quarter turn, so the target is 2.8 - pi (the same box, turned the short way).
  const Tensor reference = from_vector<double>({10, 20, 8, 4, 0.1, 0, 0, 10, 20, -1.4}, {2, 5});
  const Tensor target = from_vector<double>({12, 19, 16, 2, 0.3, 5, -10, 10, 20, 1.4}, {2, 5});
  const std::vector<double> expected = {0.25, -0.25, std::log(2.0), std::log(0.5), 0.2,
                                        0.5,  -0.5,  0.0,           0.0,           2.8 - kPi};
  const std::vector<double> unit = values(RotatedBoxCoder().encode(target, reference));
  REQUIRE(unit.size() == expected.size());
  for (size_t k = 0; k < expected.size(); ++k) CHECK(unit[k] == doctest::Approx(expected[k]).epsilon(1e-14));
  const double scale[5] = {10, 10, 5, 5, 2};
  const std::vector<double> head = values(RotatedBoxCoder({10, 10, 5, 5, 2}).encode(target, reference));
  for (size_t k = 0; k < expected.size(); ++k)
    CHECK(head[k] == doctest::Approx(expected[k] * scale[k % 5]).epsilon(1e-14));
  // Any leading shape.
  CHECK(RotatedBoxCoder().encode(target.view({1, 2, 5}), reference.view({1, 2, 5})).sizes() == Shape{1, 2, 5});
}

TEST_CASE("values/rotated_box_coder: the angle difference wraps: 0.9 pi encodes as -0.1 pi times wa") {
  for (double wa : {1.0, 2.0}) {
    CAPTURE(wa);
    const RotatedBoxCoder coder({1, 1, 1, 1, wa});
    // Rows: Ga - Pa = 0.9 pi, -0.9 pi, exactly a half turn (the range's closed end), and 0.2 (no wrap).
    const Tensor reference =
        from_vector<double>({0, 0, 4, 2, -0.45 * kPi, 0, 0, 4, 2, 0.45 * kPi, 0, 0, 4, 2, -0.25 * kPi, 0, 0, 4, 2, 0.1},
                            {4, 5});
    const Tensor target =
        from_vector<double>({0, 0, 4, 2, 0.45 * kPi, 0, 0, 4, 2, -0.45 * kPi, 0, 0, 4, 2, 0.25 * kPi, 0, 0, 4, 2, 0.3},
                            {4, 5});
    const std::vector<double> d = values(coder.encode(target, reference));
    CHECK(d[4] == doctest::Approx(-0.1 * kPi * wa).epsilon(1e-12));
    CHECK(d[9] == doctest::Approx(0.1 * kPi * wa).epsilon(1e-12));
    CHECK(d[14] == -kPi / 2 * wa);
    CHECK(d[19] == doctest::Approx(0.2 * wa).epsilon(1e-12));
    // Decoding turns back the short way and lands on the target's angle.
    const std::vector<double> back = values(coder.decode(coder.encode(target, reference), reference));
    CHECK(back[4] == doctest::Approx(0.45 * kPi).epsilon(1e-12));
    CHECK(back[9] == doctest::Approx(-0.45 * kPi).epsilon(1e-12));
    CHECK(angle_gap(back[14], 0.25 * kPi) < 1e-12);
    CHECK(back[19] == doctest::Approx(0.3).epsilon(1e-12));
  }
  // decode wraps too: 0.45 pi + 0.1 pi = 0.55 pi is the box at -0.45 pi.
  const Tensor p = from_vector<double>({0, 0, 4, 2, 0.45 * kPi}, {1, 5});
  const Tensor turn = from_vector<double>({0, 0, 0, 0, 0.1 * kPi}, {1, 5});
  const std::vector<double> b = values(RotatedBoxCoder().decode(turn, p));
  CHECK(b[4] == doctest::Approx(-0.45 * kPi).epsilon(1e-12));
}

TEST_CASE("values/rotated_box_coder: decode inverts encode up to the angle's range") {
  // Reference angles in the range, target angles over three turns either way (normalised by the round trip).
  const Tensor reference = random_rotated_boxes(200, kFloat64, 1);
  const Tensor target = random_rotated_boxes(200, kFloat64, 2, -3 * kPi, 3 * kPi);
  for (const RotatedBoxCoder& coder : {RotatedBoxCoder(), RotatedBoxCoder({10, 10, 5, 5, 2})}) {
    const Tensor round_trip = coder.decode(coder.encode(target, reference), reference);
    REQUIRE(round_trip.sizes() == target.sizes());
    CHECK(max_abs_diff(slice(round_trip, 1, 0, 4), slice(target, 1, 0, 4)) < 1e-11);
    const std::vector<double> got = values(select(round_trip, 1, 4)), given = values(select(target, 1, 4));
    for (size_t k = 0; k < got.size(); ++k) {
      CHECK(in_range(got[k]));
      CHECK(std::abs(got[k] - models::normalize_angle(given[k])) < 1e-11);
    }
  }
  // float32 too, to float32 precision (angles compared as box angles: a float may wrap at the range's end).
  const RotatedBoxCoder coder({10, 10, 5, 5, 1});
  const Tensor r32 = reference.to(kFloat32), t32 = target.to(kFloat32);
  const Tensor round_trip = coder.decode(coder.encode(t32, r32), r32);
  CHECK(max_abs_diff(slice(round_trip, 1, 0, 4), slice(t32, 1, 0, 4)) < 1e-4);
  const std::vector<double> got = values(select(round_trip, 1, 4)), given = values(select(t32, 1, 4));
  for (size_t k = 0; k < got.size(); ++k) CHECK(angle_gap(got[k], given[k]) < 1e-5);
}

TEST_CASE("values/rotated_box_coder: edge swap turns at most a quarter and decodes to the same box") {
  // By hand: G = (0, 0, 20, 10, 0.6 pi) from P = (0, 0, 10, 20, 0): the plain turn is -0.4 pi (wrapped); G is
  // also (0, 0, 10, 20, 0.1 pi), a turn of 0.1 pi with no change of sides.
  const Tensor g = from_vector<double>({0, 0, 20, 10, 0.6 * kPi}, {1, 5});
  const Tensor p = from_vector<double>({0, 0, 10, 20, 0}, {1, 5});
  const RotatedBoxCoder swapping({1, 1, 1, 1, 1}, std::log(1000.0 / 16.0), OffsetFrame::kImage, true);
  const std::vector<double> d = values(swapping.encode(g, p));
  CHECK(d[2] == doctest::Approx(0.0));  // log(10 / 10)
  CHECK(d[3] == doctest::Approx(0.0));  // log(20 / 20)
  CHECK(d[4] == doctest::Approx(0.1 * kPi));
  const std::vector<double> plain = values(RotatedBoxCoder().encode(g, p));
  CHECK(plain[2] == doctest::Approx(std::log(2.0)));
  CHECK(plain[4] == doctest::Approx(-0.4 * kPi));

  // Random pairs, both frames: |da| <= pi/4 wa, and decode gives a box with G's corners.
  const Tensor reference = random_rotated_boxes(300, kFloat64, 11);
  const Tensor target = random_rotated_boxes(300, kFloat64, 12, -3 * kPi, 3 * kPi);
  for (OffsetFrame frame : {OffsetFrame::kImage, OffsetFrame::kBox}) {
    const RotatedBoxCoder coder({10, 10, 5, 5, 2}, std::log(1000.0 / 16.0), frame, true);
    const Tensor deltas = coder.encode(target, reference);
    for (double da : values(select(deltas, 1, 4))) CHECK(std::abs(da) <= 2 * kPi / 4 + 1e-12);
    const Tensor back = coder.decode(deltas, reference);
    const std::vector<double> b = values(back), t = values(target);
    for (size_t k = 0; k < 300; ++k) {
      // The same rectangle: same centre, and the same side along each direction.
      const double* x = &b[5 * k];
      const double* y = &t[5 * k];
      CHECK(std::abs(x[0] - y[0]) < 1e-9);
      CHECK(std::abs(x[1] - y[1]) < 1e-9);
      const bool swapped = angle_gap(x[4], y[4]) > 1e-6;
      CHECK(angle_gap(x[4], swapped ? y[4] + kPi / 2 : y[4]) < 1e-9);
      CHECK(std::abs(x[2] - (swapped ? y[3] : y[2])) < 1e-9);
      CHECK(std::abs(x[3] - (swapped ? y[2] : y[3])) < 1e-9);
    }
  }
}

TEST_CASE("values/rotated_box_coder: angle-0 boxes give BoxCoder's dx dy dw dh on the axis-aligned boxes") {
  const Tensor reference = mul(random_rotated_boxes(100, kFloat64, 3), from_vector<double>({1, 1, 1, 1, 0}));
  const Tensor target = mul(random_rotated_boxes(100, kFloat64, 4), from_vector<double>({1, 1, 1, 1, 0}));
  for (const std::array<double, 4>& w : {std::array<double, 4>{1, 1, 1, 1}, std::array<double, 4>{10, 10, 5, 5}}) {
    const RotatedBoxCoder rotated({w[0], w[1], w[2], w[3], 3.0});
    const BoxCoder axis_aligned(w);
    const Tensor d = rotated.encode(target, reference);
    // BoxCoder recovers w as x2 - x1 of the corners, which rounds: equal up to a few ulps.
    CHECK(max_abs_diff(slice(d, 1, 0, 4), axis_aligned.encode(to_xyxy(target), to_xyxy(reference))) < 1e-12);
    CHECK(max_abs_diff(select(d, 1, 4), zeros({100}, kFloat64)) == 0.0);
    // Decoding: the centre and size never depend on the angles (offsets in image axes), so even with turning
    // deltas and turned references the boxes are BoxCoder's.
    const Tensor deltas = random_deltas(100, 10, kFloat64, 5);
    const Tensor turned = random_rotated_boxes(100, kFloat64, 3);  // reference's centres and sizes, any angle
    const Tensor boxes = reshape(rotated.decode(deltas, turned), {100, 2, 5});
    const Tensor plain = reshape(axis_aligned.decode(reshape(slice(reshape(deltas, {100, 2, 5}), 2, 0, 4), {100, 8}),
                                                     to_xyxy(turned)),
                                 {100, 2, 4});
    CHECK(max_abs_diff(to_xyxy(boxes), plain) < 1e-12);
  }
}

TEST_CASE("values/rotated_box_coder: decode by hand with K boxes per reference") {
  // Reference (5, 10, 10, 20, 0.2); box 0: zero deltas give the reference back; box 1: dx = 1 (weight 10:
  // 0.1 * Pw = 1), dy = -10 (-1 * Ph = -20), dw = 5 log 2 (width doubles), dh = 0, da = 0.3 (weight 1).
  const RotatedBoxCoder coder({10, 10, 5, 5, 1});
  const Tensor reference = from_vector<double>({5, 10, 10, 20, 0.2}, {1, 5});
  const Tensor deltas = from_vector<double>({0, 0, 0, 0, 0, 1, -10, 5 * std::log(2.0), 0, 0.3}, {1, 10});
  const std::vector<double> boxes = values(coder.decode(deltas, reference));
  const std::vector<double> expected = {5, 10, 10, 20, 0.2, 6, -10, 20, 20, 0.5};
  REQUIRE(boxes.size() == expected.size());
  for (size_t k = 0; k < expected.size(); ++k) CHECK(boxes[k] == doctest::Approx(expected[k]).epsilon(1e-14));
}

TEST_CASE("values/rotated_box_coder: the clip caps w and h and stops their gradient") {
  const RotatedBoxCoder coder({1, 1, 1, 1, 2});  // ww = wh = 1: the clip applies to dw and dh themselves
  CHECK(coder.bbox_xform_clip() == doctest::Approx(std::log(1000.0 / 16.0)));
  const Tensor reference = from_vector<double>({8, 8, 16, 16, 0.5}, {1, 5});
  const Tensor deltas = from_vector<double>({0, 0, 10, 1, 0.4}, {1, 5}).requires_grad_();
  const Tensor boxes = coder.decode(deltas, reference);
  // w = 16 * exp(min(10, log 62.5)) = 1000; h = 16 e, not clipped; a = 0.5 + 0.4 / 2.
  const std::vector<double> b = values(boxes);
  CHECK(b[2] == doctest::Approx(1000.0));
  CHECK(b[3] == doctest::Approx(16 * std::exp(1.0)));
  CHECK(b[4] == doctest::Approx(0.7));
  // Upstream (1, 2, 3, 4, 5): d/d dx = Pw, d/d dy = 2 Ph, d/d dw = 0 (clipped), d/d dh = 4 h, d/d da = 5 / wa.
  boxes.backward(from_vector<double>({1, 2, 3, 4, 5}, {1, 5}));
  const std::vector<double> g = values(deltas.grad());
  CHECK(g[0] == doctest::Approx(16));
  CHECK(g[1] == doctest::Approx(32));
  CHECK(g[2] == 0.0);
  CHECK(g[3] == doctest::Approx(4 * 16 * std::exp(1.0)));
  CHECK(g[4] == doctest::Approx(2.5));
  // A smaller clip caps both sides.
  const std::vector<double> small =
      values(RotatedBoxCoder({1, 1, 1, 1, 1}, 0.5).decode(from_vector<double>({0, 0, 3, 3, 0}, {1, 5}), reference));
  CHECK(small[2] == doctest::Approx(16 * std::exp(0.5)));
  CHECK(small[3] == doctest::Approx(16 * std::exp(0.5)));
}

TEST_CASE("values/rotated_box_coder: empty inputs give empty outputs") {
  const RotatedBoxCoder coder;
  CHECK(coder.encode(zeros({0, 5}, kFloat64), zeros({0, 5}, kFloat64)).sizes() == Shape{0, 5});
  CHECK(coder.encode(zeros({2, 0, 5}), zeros({2, 0, 5})).sizes() == Shape{2, 0, 5});
  CHECK(coder.decode(zeros({0, 10}, kFloat64), zeros({0, 5}, kFloat64)).sizes() == Shape{0, 10});
  const Tensor d = zeros({0, 5}).requires_grad_();
  const Tensor out = coder.decode(d, zeros({0, 5}));
  CHECK(out.sizes() == Shape{0, 5});
  CHECK(out.requires_grad());
}

TEST_CASE("gradcheck/rotated_box_coder: decode in float64 in the deltas and the reference boxes") {
  // K = 2 boxes per reference, head weights with wa = 2. Angles chosen so that Pa + da / wa stays at least
  // 0.3 from a wrap point (pi/2 + k pi), where the decoded angle jumps; two of the eight wrap.
  const RotatedBoxCoder coder({10, 10, 5, 5, 2});
  const double pa[4] = {-1.2, -0.3, 0.5, 1.3};
  const double turn[4][2] = {{0.4, -0.8}, {0.6, -0.2}, {0.7, -0.9}, {0.6, -0.5}};  // da / wa
  std::vector<double> d = values(random_deltas(4, 10, kFloat64, 6));
  std::vector<double> p = values(random_rotated_boxes(4, kFloat64, 7));
  for (int i = 0; i < 4; ++i) {
    p[i * 5 + 4] = pa[i];
    for (int k = 0; k < 2; ++k) d[i * 10 + k * 5 + 4] = turn[i][k] * 2;
  }
  const Tensor deltas = from_vector<double>(d, {4, 10}).requires_grad_();
  const Tensor reference = from_vector<double>(p, {4, 5}).requires_grad_();
  const autograd::GradcheckResult r =
      autograd::gradcheck([coder](const TensorList& in) { return coder.decode(in[0], in[1]); }, {deltas, reference});
  MESSAGE("decode: max_abs_error " << r.max_abs_error);
  CHECK_MESSAGE(r.ok, r.report);
  // The wrap happened where it should: rows 0 (k = 1) and 3 (k = 0) came back by pi.
  const std::vector<double> boxes = values(coder.decode(deltas.detach(), reference.detach()));
  CHECK(boxes[5 + 4] == doctest::Approx(-2.0 + kPi));
  CHECK(boxes[30 + 4] == doctest::Approx(1.9 - kPi));

  // encode in the target and the reference boxes; angle differences 0.3 or more from a wrap point.
  std::vector<double> g = values(random_rotated_boxes(4, kFloat64, 8));
  std::vector<double> q = values(random_rotated_boxes(4, kFloat64, 9));
  const double ga[4] = {1.2, -1.0, 0.3, 1.4}, qa[4] = {-1.1, 0.2, 0.4, -0.6};  // differences 2.3, -1.2, -0.1, 2
  for (int i = 0; i < 4; ++i) {
    g[i * 5 + 4] = ga[i];
    q[i * 5 + 4] = qa[i];
  }
  const Tensor target = from_vector<double>(g, {4, 5}).requires_grad_();
  const Tensor reference2 = from_vector<double>(q, {4, 5}).requires_grad_();
  const autograd::GradcheckResult e = autograd::gradcheck(
      [coder](const TensorList& in) { return coder.encode(in[0], in[1]); }, {target, reference2});
  MESSAGE("encode: max_abs_error " << e.max_abs_error);
  CHECK_MESSAGE(e.ok, e.report);
}

TEST_CASE("values/rotated_box_coder: offsets in the box frame: by hand, at angle 0, and decode inverts encode") {
  const OffsetFrame box = OffsetFrame::kBox;
  // A reference turned a quarter: its x axis u = (cos a, -sin a) points up the screen, (0, -1), and its y axis
  // v = (sin a, cos a) points right, (1, 0). A target 5 px above and 2 px right of its centre is 5 along u and
  // 2 along v: dx = 5 / Pw, dy = 2 / Ph, where the image frame would give dx = 2 / Pw, dy = -5 / Ph.
  const Tensor p = from_vector<double>({10, 20, 40, 8, kPi / 2}, {1, 5});
  const Tensor g = from_vector<double>({12, 15, 40, 8, kPi / 2 - 1e-9}, {1, 5});
  const RotatedBoxCoder unit_box({1, 1, 1, 1, 1}, std::log(1000.0 / 16.0), box);
  const std::vector<double> in_box = values(unit_box.encode(g, p));
  const std::vector<double> in_image = values(RotatedBoxCoder().encode(g, p));
  CHECK(in_box[0] == doctest::Approx(5.0 / 40).epsilon(1e-12));
  CHECK(in_box[1] == doctest::Approx(2.0 / 8).epsilon(1e-12));
  CHECK(in_image[0] == doctest::Approx(2.0 / 40));
  CHECK(in_image[1] == doctest::Approx(-5.0 / 8));
  for (int j = 2; j < 5; ++j) CHECK(in_box[j] == in_image[j]);  // w, h and the angle do not depend on the frame

  // At angle 0 the frames agree (u = x, v = y).
  std::vector<double> a = values(random_rotated_boxes(6, kFloat64, 31));
  std::vector<double> b = values(random_rotated_boxes(6, kFloat64, 32));
  for (int i = 0; i < 6; ++i) a[i * 5 + 4] = b[i * 5 + 4] = 0;
  const Tensor ga = from_vector<double>(a, {6, 5}), pb = from_vector<double>(b, {6, 5});
  const RotatedBoxCoder framed({10, 10, 5, 5, 1}, std::log(1000.0 / 16.0), box), imaged({10, 10, 5, 5, 1});
  CHECK(test::allclose(framed.encode(ga, pb), imaged.encode(ga, pb), 1e-14, 1e-14));

  // decode(encode(G, P), P) = G at any angles.
  const Tensor gr = random_rotated_boxes(50, kFloat64, 33), pr = random_rotated_boxes(50, kFloat64, 34);
  CHECK(test::allclose(framed.decode(framed.encode(gr, pr), pr), gr, 1e-9, 1e-9));
  CHECK(framed.frame() == box);
}

TEST_CASE("gradcheck/rotated_box_coder: decode and encode with offsets in the box frame") {
  const RotatedBoxCoder coder({10, 10, 5, 5, 2}, std::log(1000.0 / 16.0), OffsetFrame::kBox);
  std::vector<double> d = values(random_deltas(3, 5, kFloat64, 41));
  std::vector<double> p = values(random_rotated_boxes(3, kFloat64, 42));
  const double pa[3] = {-1.0, 0.2, 1.1};
  for (int i = 0; i < 3; ++i) {
    p[i * 5 + 4] = pa[i];
    d[i * 5 + 4] = 0.2;  // Pa + da / wa stays 0.3 or more from a wrap point
  }
  const Tensor deltas = from_vector<double>(d, {3, 5}).requires_grad_();
  const Tensor reference = from_vector<double>(p, {3, 5}).requires_grad_();
  const autograd::GradcheckResult r =
      autograd::gradcheck([coder](const TensorList& in) { return coder.decode(in[0], in[1]); }, {deltas, reference});
  MESSAGE("decode (box frame): max_abs_error " << r.max_abs_error);
  CHECK_MESSAGE(r.ok, r.report);
  std::vector<double> g = values(random_rotated_boxes(3, kFloat64, 43));
  const double ga[3] = {-0.7, 0.5, 1.3};
  for (int i = 0; i < 3; ++i) g[i * 5 + 4] = ga[i];
  const Tensor target = from_vector<double>(g, {3, 5}).requires_grad_();
  const autograd::GradcheckResult e = autograd::gradcheck(
      [coder](const TensorList& in) { return coder.encode(in[0], in[1]); }, {target, reference});
  MESSAGE("encode (box frame): max_abs_error " << e.max_abs_error);
  CHECK_MESSAGE(e.ok, e.report);
}

TEST_CASE("errors/rotated_box_coder: bad weights clip shapes and dtypes") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_CONTAINING(RotatedBoxCoder({1, 1, 1, 1, 0}), "RotatedBoxCoder: expected positive finite weights");
  CHECK_THROWS_CONTAINING(RotatedBoxCoder({1, -1, 1, 1, 1}), "expected positive finite weights, got (1, -1, 1, 1, 1)");
  CHECK_THROWS_CONTAINING(RotatedBoxCoder({1, 1, inf, 1, 1}), "expected positive finite weights");
  CHECK_THROWS_CONTAINING(RotatedBoxCoder({1, 1, 1, std::nan(""), 1}), "expected positive finite weights");
  CHECK_THROWS_CONTAINING(RotatedBoxCoder({1, 1, 1, 1, 1}, std::nan("")), "expected a finite bbox_xform_clip");
  CHECK_THROWS_CONTAINING(RotatedBoxCoder({1, 1, 1, 1, 1}, inf), "expected a finite bbox_xform_clip, got inf");
  const RotatedBoxCoder coder;
  const Tensor reference = zeros({3, 5});
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 4}), reference),
                          "RotatedBoxCoder::decode: expected deltas of shape (N, 5K) with N = 3");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({2, 5}), reference), "expected deltas of shape (N, 5K)");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 0}), reference), "K >= 1");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({15}), reference), "expected deltas of shape (N, 5K)");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 5}), zeros({3, 4})),
                          "expected reference_boxes of shape (N, 5) with 5 values (cx, cy, w, h, angle)");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 5}), zeros({1, 3, 5})), "reference_boxes (N, 5) with 2 dims");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 5}, kFloat64), reference), "of the same dtype");
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 5}, kInt64), zeros({3, 5}, kInt64)), "float32 or float64");
  CHECK_THROWS_CONTAINING(coder.decode(Tensor(), reference), "RotatedBoxCoder::decode");
  CHECK_THROWS_CONTAINING(coder.encode(zeros({2, 5}), reference), "of the same shape");
  CHECK_THROWS_CONTAINING(coder.encode(zeros({3, 4}), zeros({3, 4})),
                          "RotatedBoxCoder::encode: expected target_boxes of shape (..., 5)");
  CHECK_THROWS_CONTAINING(coder.encode(reference, zeros({3, 4})), "expected reference_boxes of shape (..., 5)");
  CHECK_THROWS_CONTAINING(coder.encode(zeros({3, 5}, kFloat64), reference), "of the same dtype");
  CHECK_THROWS_CONTAINING(coder.encode(zeros({3, 5}, kInt64), zeros({3, 5}, kInt64)), "float32 or float64");
  CHECK_THROWS_CONTAINING(models::normalize_angle(zeros({3}, kInt64)),
                          "normalize_angle: expected a to be float32 or float64");
  CHECK_THROWS_CONTAINING(models::normalize_angle(Tensor()), "normalize_angle");
}

MINIDET_CUDA_TEST_CASE("errors/rotated_box_coder: deltas and boxes on different devices") {
  const RotatedBoxCoder coder;
  CHECK_THROWS_CONTAINING(coder.decode(zeros({3, 5}, Device::cuda()), zeros({3, 5})), "on the same device");
  CHECK_THROWS_CONTAINING(coder.encode(zeros({3, 5}, Device::cuda()), zeros({3, 5})), "on the same device");
}

MINIDET_CUDA_TEST_CASE("cuda/rotated_box_coder: encode and decode match the CPU") {
  const RotatedBoxCoder coder({10, 10, 5, 5, 2});
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor reference = random_rotated_boxes(300, dtype, 11);
    const Tensor target = random_rotated_boxes(300, dtype, 12, -3 * kPi, 3 * kPi);  // wraps in encode
    // Deltas up to 30: dw and dh on both sides of the clip, angles that wrap in decode.
    const Tensor deltas = random_deltas(300, 10, dtype, 13, 30.0);
    Generator g(14);
    const Tensor upstream = randn({300, 10}, dtype, &g);
    const Tensor encoded = coder.encode(target.cuda(), reference.cuda());
    CHECK(encoded.device() == Device::cuda());
    CHECK(allclose(encoded.cpu(), coder.encode(target, reference), 1e-5, 1e-5));
    const RotatedBoxCoder swapping({10, 10, 5, 5, 2}, std::log(1000.0 / 16.0), OffsetFrame::kImage, true);
    CHECK(allclose(swapping.encode(target.cuda(), reference.cuda()).cpu(), swapping.encode(target, reference), 1e-5,
                   1e-5));
    // normalize_angle: add, div, floor, mul, sub are exactly rounded on both: the same bits.
    const Tensor angles = mul(sub(rand({1000}, kFloat64, &g), 0.5), 40.0).to(dtype);
    CHECK(max_abs_diff(models::normalize_angle(angles.cuda()).cpu(), models::normalize_angle(angles)) == 0.0);
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
}
