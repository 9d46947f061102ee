// box_iou_rotated: exact answers by hand (identical boxes, the 45-degree octagon, containment, shared edges
// and touching corners, the angle period, zero-area and negative sizes), agreement with box_iou on
// axis-aligned boxes, float32 against float64, the NaN and empty policies, every bad input, and CUDA against
// the CPU. tests/reference/box_iou_rotated_reference.py judges the CPU areas against shapely.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/factories.h"
#include "core/grad_mode.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"
#include "ops/boxes/boxes.h"
#include "ops/shape/shape.h"
#include "tests/support.h"

using namespace minidet;

namespace {

constexpr double kPi = 3.14159265358979323846;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

using Box = std::vector<double>;  // (cx, cy, w, h, angle)

Tensor boxes_of(const std::vector<Box>& rows, DType dtype = kFloat64) {
  std::vector<double> values;
  for (const Box& row : rows) values.insert(values.end(), row.begin(), row.end());
  return from_vector<double>(values, {static_cast<int64_t>(rows.size()), 5}).to(dtype);
}

double iou_of(const Box& a, const Box& b, DType dtype = kFloat64) {
  return box_iou_rotated(boxes_of({a}, dtype), boxes_of({b}, dtype)).to(kFloat64).item<double>();
}

// The centre of the box next to `box` along its own x axis (steps_u = 1, sharing the edge of length h) or y
// axis (steps_v = 1), or diagonally (both): c + steps_u * w (cos a, -sin a) + steps_v * h (sin a, cos a).
Box neighbour(const Box& box, double steps_u, double steps_v) {
  const double c = std::cos(box[4]), s = std::sin(box[4]);
  return {box[0] + steps_u * box[2] * c + steps_v * box[3] * s, box[1] - steps_u * box[2] * s + steps_v * box[3] * c,
          box[2], box[3], box[4]};
}

// count boxes with centres in [0, span)^2, sides in [min_side, min_side + side_range), any angle in
// [-4, 4): with span about the side lengths most pairs overlap, some do not.
std::vector<Box> random_rotated_boxes(int count, uint64_t seed, double span = 30, double min_side = 1,
                                      double side_range = 25) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<Box> boxes;
  for (int k = 0; k < count; ++k)
    boxes.push_back({span * unit(rng), span * unit(rng), min_side + side_range * unit(rng),
                     min_side + side_range * unit(rng), -4 + 8 * unit(rng)});
  return boxes;
}

// Pairs that stress the clip: identical, rotated copies, contained, shared edges, touching corners, the
// quarter and half turns, nearly parallel edges, zero-area and negative sizes, far apart, large coordinates.
// Returned as two lists of the same length (pair k is (first[k], second[k])).
void hard_pairs(std::vector<Box>& first, std::vector<Box>& second) {
  const auto add = [&](const Box& a, const Box& b) {
    first.push_back(a);
    second.push_back(b);
  };
  const Box a = {0, 0, 4, 2, 0.3};
  add(a, a);
  add(a, {0, 0, 4, 2, 0.3 + kPi});
  add(a, {0, 0, 4, 2, 0.3 - kPi});
  add({0, 0, 2, 2, 0}, {0, 0, 2, 2, kPi / 4});
  add(a, {0.1, 0.2, 1, 0.5, 1.1});  // inside a
  add({1, 1, 2, 2, 0}, {3, 1, 2, 2, 0});
  add({1, 1, 2, 2, 0}, {3, 3, 2, 2, 0});
  add(a, neighbour(a, 1, 0));
  add(a, neighbour(a, 0, -1));
  add(a, neighbour(a, 1, 1));
  add({0, 0, 2, 4, kPi / 2}, {4, 0, 2, 4, kPi / 2});
  add({0, 0, 4, 2, 0}, {0, 0, 2, 4, kPi / 2});
  add({0, 0, 4, 2, 0}, {0, 0, 2, 4, -kPi / 2});
  add({0, 0, 4, 2, 0}, {0, 0, 4, 2, kPi});
  add({5, 5, 4, 2, 0.2}, {5.5, 5.2, 4, 2, 0.2 + 1e-7});
  add({5, 5, 4, 2, 0.2}, {9, 5, 4, 2, 0.2 + 1e-7});
  add({0, 0, 0, 2, 0.5}, {0, 0, 0, 2, 0.5});
  add({0, 0, 3, 0, 0.5}, {0, 0, 4, 2, 0.5});
  add({0, 0, -4, 2, 0.7}, {1, 0.5, 3, -3, -0.2});
  add({0, 0, 4, 2, 0.3}, {1e4, -1e4, 4, 2, 0.3});
  add({12345.5, -6789.25, 40, 12, 0.9}, {12350.25, -6785.5, 30, 20, -0.4});
  add({0, 0, 1000, 1, 0.01}, {0, 0.3, 1000, 1, 0.0100001});
}

// Elementwise comparison that treats two NaNs as equal; returns the largest |a - b| over the other elements
// and counts NaN mismatches in `nan_mismatches`.
double max_diff_nan_aware(const Tensor& a, const Tensor& b, int& nan_mismatches) {
  REQUIRE(a.sizes() == b.sizes());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0;
  nan_mismatches = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    if (std::isnan(x[k]) || std::isnan(y[k])) {
      nan_mismatches += std::isnan(x[k]) != std::isnan(y[k]);
      continue;
    }
    worst = std::max(worst, std::fabs(x[k] - y[k]));
  }
  return worst;
}

}  // namespace

// ---- values ---------------------------------------------------------------------------------------------

TEST_CASE("values/box_iou_rotated: identical boxes give exactly 1 at any angle") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    for (double angle : {0.0, 0.3, -1.2, kPi / 2, -kPi / 2, kPi, 2.5, 100.0}) {
      CAPTURE(angle);
      CHECK(iou_of({3, -2, 4, 1.5, angle}, {3, -2, 4, 1.5, angle}, dtype) == 1.0);
      CHECK(iou_of({12345.5, 678.25, 33, 7, angle}, {12345.5, 678.25, 33, 7, angle}, dtype) == 1.0);
    }
  }
}

TEST_CASE("values/box_iou_rotated: a square and itself turned 45 degrees meet in an octagon of IoU 1 over sqrt 2") {
  // Two squares of side s with one centre meet in a regular octagon of inradius s/2: area 8 (s/2)^2 tan(pi/8)
  // = 2 s^2 (sqrt 2 - 1). IoU = 2 (sqrt 2 - 1) / (2 - 2 (sqrt 2 - 1)) = 1 / sqrt 2.
  for (double side : {2.0, 0.5, 37.0}) {
    CAPTURE(side);
    CHECK(iou_of({0, 0, side, side, 0}, {0, 0, side, side, kPi / 4}) == doctest::Approx(1 / std::sqrt(2.0)).epsilon(1e-14));
    CHECK(iou_of({7, 9, side, side, 0.3}, {7, 9, side, side, 0.3 - kPi / 4}) ==
          doctest::Approx(1 / std::sqrt(2.0)).epsilon(1e-14));
  }
  CHECK(iou_of({0, 0, 2, 2, 0}, {0, 0, 2, 2, kPi / 4}, kFloat32) == doctest::Approx(1 / std::sqrt(2.0)).epsilon(1e-6));
}

TEST_CASE("values/box_iou_rotated: a box inside another gives the ratio of their areas") {
  // b's farthest corner is within |c_b| + half-diagonal(b) < 0.8 of a's centre, inside a's inradius 1.
  CHECK(iou_of({0, 0, 4, 2, 0.3}, {0.1, 0.2, 1, 0.5, 1.1}) == doctest::Approx(0.5 / 8).epsilon(1e-14));
  CHECK(iou_of({0.1, 0.2, 1, 0.5, 1.1}, {0, 0, 4, 2, 0.3}) == doctest::Approx(0.5 / 8).epsilon(1e-14));
  // A diamond inside a square: the square (0, 0, 2, 2, 0) holds the diamond with corners (+-1, 0), (0, +-1).
  CHECK(iou_of({0, 0, 2, 2, 0}, {0, 0, std::sqrt(2.0), std::sqrt(2.0), kPi / 4}) == doctest::Approx(0.5).epsilon(1e-14));
}

TEST_CASE("values/box_iou_rotated: translated parallel boxes and nearly parallel edges") {
  // Same angle: in a's frame b is offset by (du, dv), and I = (w - |du|)(h - |dv|).
  const double angle = 0.2, dx = 0.5, dy = 0.2;
  const double du = dx * std::cos(angle) - dy * std::sin(angle), dv = dx * std::sin(angle) + dy * std::cos(angle);
  const double inter = (4 - std::fabs(du)) * (2 - std::fabs(dv));
  const double expected = inter / (16 - inter);
  CHECK(iou_of({5, 5, 4, 2, angle}, {5 + dx, 5 + dy, 4, 2, angle}) == doctest::Approx(expected).epsilon(1e-14));
  // 1e-7 radians apart: the IoU moves by O(1e-7), and nothing blows up.
  CHECK(iou_of({5, 5, 4, 2, angle}, {5 + dx, 5 + dy, 4, 2, angle + 1e-7}) == doctest::Approx(expected).epsilon(1e-6));
  CHECK(iou_of({5, 5, 4, 2, angle}, {5 + dx, 5 + dy, 4, 2, angle - 1e-7}, kFloat32) ==
        doctest::Approx(expected).epsilon(1e-5));
  // Two long thin boxes, nearly parallel, overlapping along their length.
  const double thin = iou_of({0, 0, 1000, 1, 0.01}, {0, 0.3, 1000, 1, 0.0100001});
  CHECK(thin > 0.5);
  CHECK(thin < 0.6);
}

TEST_CASE("values/box_iou_rotated: shared edges and touching corners give exactly 0") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    CHECK(iou_of({1, 1, 2, 2, 0}, {3, 1, 2, 2, 0}, dtype) == 0.0);  // shared edge x = 2
    CHECK(iou_of({1, 1, 2, 2, 0}, {3, 3, 2, 2, 0}, dtype) == 0.0);  // touching corner (2, 2)
    CHECK(iou_of({0, 0, 2, 4, kPi / 2}, {4, 0, 2, 4, kPi / 2}, dtype) == 0.0);
    // Diamonds (corners (+-1, 0), (0, +-1)) touching at (1, 0).
    const double side = std::sqrt(2.0);
    CHECK(iou_of({0, 0, side, side, kPi / 4}, {2, 0, side, side, kPi / 4}, dtype) == 0.0);
    for (double angle : {0.4, 1.0, -0.7, kPi / 4, 3.0}) {
      CAPTURE(angle);
      const Box a = {0, 0, 3, 2, angle};
      for (const Box& b : {neighbour(a, 1, 0), neighbour(a, -1, 0), neighbour(a, 0, 1), neighbour(a, 0, -1),
                           neighbour(a, 1, 1), neighbour(a, -1, 1)}) {
        CHECK(iou_of(a, b, dtype) == 0.0);
        CHECK(iou_of(b, a, dtype) == 0.0);
      }
    }
  }
}

TEST_CASE("values/box_iou_rotated: the angles 0 pi/2 pi -pi/2 and a plus or minus pi describe the same boxes") {
  // A quarter turn with w and h swapped is the same axis-aligned box; a half turn is the same box.
  CHECK(iou_of({0, 0, 4, 2, 0}, {0, 0, 2, 4, kPi / 2}) == doctest::Approx(1.0).epsilon(1e-14));
  CHECK(iou_of({0, 0, 4, 2, 0}, {0, 0, 2, 4, -kPi / 2}) == doctest::Approx(1.0).epsilon(1e-14));
  CHECK(iou_of({0, 0, 4, 2, 0}, {0, 0, 4, 2, kPi}) == doctest::Approx(1.0).epsilon(1e-14));
  // [-2, 2] x [-1, 1] and, turned, [-1, 3] x [-1, 1]: I = 3 * 2, U = 8 + 8 - 6.
  CHECK(iou_of({0, 0, 4, 2, 0}, {1, 0, 2, 4, kPi / 2}) == doctest::Approx(0.6).epsilon(1e-14));
  // IoU does not depend on the representative of the angle modulo pi.
  const std::vector<Box> a = random_rotated_boxes(20, 1), b = random_rotated_boxes(30, 2);
  const Tensor reference = box_iou_rotated(boxes_of(a), boxes_of(b));
  for (double turn : {kPi, -kPi, 2 * kPi, -3 * kPi}) {
    CAPTURE(turn);
    std::vector<Box> a_turned = a, b_turned = b;
    for (Box& box : a_turned) box[4] += turn;
    for (Box& box : b_turned) box[4] -= turn;
    CHECK(test::max_abs_diff(box_iou_rotated(boxes_of(a_turned), boxes_of(b_turned)), reference) < 1e-12);
  }
}

TEST_CASE("values/box_iou_rotated: axis-aligned boxes agree with box_iou") {
  // Random xyxy boxes, converted to (cx, cy, w, h, 0) and to the equivalent (cx, cy, h, w, pi/2).
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> xyxy;
  std::vector<Box> upright, turned;
  for (int k = 0; k < 60; ++k) {
    const double x1 = 20 * unit(rng), y1 = 20 * unit(rng), w = 0.5 + 15 * unit(rng), h = 0.5 + 15 * unit(rng);
    xyxy.insert(xyxy.end(), {x1, y1, x1 + w, y1 + h});
    upright.push_back({x1 + w / 2, y1 + h / 2, w, h, 0});
    turned.push_back({x1 + w / 2, y1 + h / 2, h, w, kPi / 2});
  }
  const Tensor boxes = from_vector<double>(xyxy, {60, 4});
  const Tensor expected = box_iou(boxes.narrow(0, 0, 25), boxes.narrow(0, 25, 35));
  const Tensor a = boxes_of(upright), b = boxes_of(turned);
  CHECK(test::max_abs_diff(box_iou_rotated(a.narrow(0, 0, 25), a.narrow(0, 25, 35)), expected) < 1e-13);
  CHECK(test::max_abs_diff(box_iou_rotated(b.narrow(0, 0, 25), b.narrow(0, 25, 35)), expected) < 1e-13);
  CHECK(test::max_abs_diff(box_iou_rotated(a.narrow(0, 0, 25), b.narrow(0, 25, 35)), expected) < 1e-13);
}

TEST_CASE("values/box_iou_rotated: zero-area boxes give 0 and never NaN") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor zero_area = boxes_of({{0, 0, 0, 2, 0.5}, {0, 0, 3, 0, 0.5}, {1, 1, 0, 0, 0}}, dtype);
    const Tensor others = boxes_of({{0, 0, 4, 2, 0.5}, {0, 0, 0, 2, 0.5}, {1, 1, 0, 0, 0}, {0, 0, 3, 0, 0.5}}, dtype);
    CHECK(box_iou_rotated(zero_area, others).to_vector<double>() == std::vector<double>(12, 0.0));
    CHECK(box_iou_rotated(others, zero_area).to_vector<double>() == std::vector<double>(12, 0.0));
  }
}

TEST_CASE("values/box_iou_rotated: negative w or h mean the same box as their absolute values") {
  const std::vector<Box> b = random_rotated_boxes(15, 8);
  const Box a = {10, 12, 8, 5, 0.6};
  const Tensor expected = box_iou_rotated(boxes_of({a}), boxes_of(b));
  for (const Box& flipped : {Box{10, 12, -8, 5, 0.6}, Box{10, 12, 8, -5, 0.6}, Box{10, 12, -8, -5, 0.6}})
    CHECK(test::max_abs_diff(box_iou_rotated(boxes_of({flipped}), boxes_of(b)), expected) == 0.0);
}

TEST_CASE("values/box_iou_rotated: far-apart boxes give 0 and the matrix is symmetric") {
  CHECK(iou_of({0, 0, 4, 2, 0.3}, {1e4, -1e4, 4, 2, 0.3}) == 0.0);
  CHECK(iou_of({0, 0, 4, 2, 0.3}, {6, 0, 4, 2, 0.3}) == 0.0);
  const Tensor boxes = boxes_of(random_rotated_boxes(40, 9));
  const Tensor iou = box_iou_rotated(boxes, boxes);
  CHECK(test::max_abs_diff(iou, iou.t().contiguous()) < 1e-13);
  const std::vector<double> values = iou.to_vector<double>();
  for (int k = 0; k < 40; ++k) CHECK(values[k * 40 + k] == 1.0);
  for (double v : values) CHECK((v >= 0.0 && v <= 1.0));
}

TEST_CASE("values/box_iou_rotated: float32 agrees with float64 on the same values even at large coordinates") {
  // The boxes are rounded to float32 first, so both dtypes see the same numbers; the local origin keeps
  // float32's error at the scale of the boxes, not of their positions near 1e4.
  for (double offset : {0.0, 1e4}) {
    CAPTURE(offset);
    std::vector<Box> a = random_rotated_boxes(70, 11), b = random_rotated_boxes(90, 12);
    for (std::vector<Box>* set : {&a, &b})
      for (Box& box : *set) box[0] += offset, box[1] -= offset;
    const Tensor a32 = boxes_of(a, kFloat32), b32 = boxes_of(b, kFloat32);
    const Tensor iou32 = box_iou_rotated(a32, b32);
    const Tensor iou64 = box_iou_rotated(a32.to(kFloat64), b32.to(kFloat64));
    CHECK(iou32.dtype() == kFloat32);
    CHECK(test::max_abs_diff(iou32, iou64) < 1e-5);
  }
}

TEST_CASE("values/box_iou_rotated: the hard pairs are in 0..1 and a pair and its mirror agree") {
  std::vector<Box> first, second;
  hard_pairs(first, second);
  const size_t count = first.size();
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const std::vector<double> forward =
        box_iou_rotated(boxes_of(first, dtype), boxes_of(second, dtype)).to_vector<double>();
    const std::vector<double> backward =
        box_iou_rotated(boxes_of(second, dtype), boxes_of(first, dtype)).to_vector<double>();
    for (size_t k = 0; k < count; ++k) {
      CAPTURE(k);
      const double v = forward[k * count + k];
      CHECK((v >= 0.0 && v <= 1.0));
      CHECK(v == doctest::Approx(backward[k * count + k]).epsilon(dtype == kFloat32 ? 1e-5 : 1e-13));
    }
    // The exact answers the CUDA case checks too: pair 0 is a box and itself, pairs 5 to 10 share an edge
    // or touch at a corner.
    CHECK(forward[0] == 1.0);
    for (size_t k = 5; k <= 10; ++k) CHECK(forward[k * count + k] == 0.0);
  }
}

TEST_CASE("values/box_iou_rotated: non-contiguous inputs give the contiguous result") {
  const Tensor a = boxes_of(random_rotated_boxes(9, 21)), b = boxes_of(random_rotated_boxes(13, 22));
  const Tensor a_strided = a.t().contiguous().t();  // (9, 5) read through a transpose of a (5, 9) buffer
  REQUIRE(!a_strided.is_contiguous());
  const Tensor b_every_other = cat({b, b}, 1).narrow(1, 0, 5);  // rows 10 apart
  REQUIRE(!b_every_other.is_contiguous());
  CHECK(test::max_abs_diff(box_iou_rotated(a_strided, b_every_other), box_iou_rotated(a, b)) == 0.0);
}

TEST_CASE("values/box_iou_rotated: NaN or Inf in a box gives NaN in that box's row or column only") {
  const Tensor a = boxes_of({{0, 0, 4, 2, 0.3}, {kNaN, 0, 4, 2, 0.3}, {0, 0, 4, 2, kInf}});
  const Tensor b = boxes_of({{0.5, 0, 4, 2, 0.1}, {0, 0, 4, kNaN, 0.1}});
  const std::vector<double> iou = box_iou_rotated(a, b).to_vector<double>();
  CHECK(iou[0] > 0.5);
  for (int k = 1; k < 6; ++k) CHECK(std::isnan(iou[k]));
}

TEST_CASE("values/box_iou_rotated: empty sets give empty matrices") {
  const Tensor some = boxes_of(random_rotated_boxes(3, 31));
  CHECK(box_iou_rotated(zeros({0, 5}, kFloat64), some).sizes() == Shape{0, 3});
  CHECK(box_iou_rotated(some, zeros({0, 5}, kFloat64)).sizes() == Shape{3, 0});
  const Tensor none = box_iou_rotated(zeros({0, 5}), zeros({0, 5}));
  CHECK(none.sizes() == Shape{0, 0});
  CHECK(none.dtype() == kFloat32);
}

TEST_CASE("values/box_iou_rotated: inputs that require grad are accepted under no-grad") {
  const Tensor a = boxes_of({{0, 0, 4, 2, 0.3}}).requires_grad_();
  NoGradGuard no_grad;
  const Tensor iou = box_iou_rotated(a, a);
  CHECK(iou.item<double>() == 1.0);
  CHECK(!iou.requires_grad());
}

// ---- errors ---------------------------------------------------------------------------------------------

TEST_CASE("errors/box_iou_rotated: bad shapes dtypes and mismatches") {
  const Tensor ok = zeros({3, 5});
  CHECK_THROWS_CONTAINING(box_iou_rotated(zeros({3, 4}), ok), "box_iou_rotated: expected boxes1 of shape (N, 5)");
  CHECK_THROWS_CONTAINING(box_iou_rotated(ok, zeros({2, 6})), "box_iou_rotated: expected boxes2 of shape (M, 5)");
  CHECK_THROWS_CONTAINING(box_iou_rotated(zeros({5}), ok), "got shape (5,)");
  CHECK_THROWS_CONTAINING(box_iou_rotated(ok, zeros({2, 2, 5})), "box_iou_rotated: expected boxes2 of shape (M, 5)");
  CHECK_THROWS_CONTAINING(box_iou_rotated(zeros({3, 5}, kInt64), ok), "box_iou_rotated: expected boxes1 to be float32 or float64");
  CHECK_THROWS_CONTAINING(box_iou_rotated(ok, zeros({3, 5}, kFloat64)), "of the same dtype");
  CHECK_THROWS_CONTAINING(box_iou_rotated(Tensor(), ok), "box_iou_rotated: boxes1 is an undefined tensor");
  CHECK_THROWS_CONTAINING(box_iou_rotated(ok, Tensor()), "box_iou_rotated: boxes2 is an undefined tensor");
}

TEST_CASE("errors/box_iou_rotated: inputs that require grad are refused while grad mode is on") {
  const Tensor ok = zeros({3, 5});
  const Tensor leaf = zeros({2, 5}).requires_grad_();
  CHECK_THROWS_CONTAINING(box_iou_rotated(leaf, ok), "box_iou_rotated: boxes1 requires grad, but box_iou_rotated is not recorded by autograd");
  CHECK_THROWS_CONTAINING(box_iou_rotated(ok, leaf), "box_iou_rotated: boxes2 requires grad");
  CHECK_THROWS_CONTAINING(box_iou_rotated(ok, leaf), "detach the boxes");
}

MINIDET_CUDA_TEST_CASE("errors/box_iou_rotated: boxes on different devices") {
  CHECK_THROWS_CONTAINING(box_iou_rotated(zeros({3, 5}), zeros({3, 5}, Device::cuda())), "on the same device");
}

// ---- cuda -----------------------------------------------------------------------------------------------

MINIDET_CUDA_TEST_CASE("cuda/box_iou_rotated: random and hard pairs match the CPU in float32 and float64") {
  std::vector<Box> first, second;
  hard_pairs(first, second);
  // The hard pairs, the NaN and Inf rows, and a few hundred random boxes on each side (odd sizes, so the
  // flattened N x M grid ends mid-block).
  first.push_back({kNaN, 0, 4, 2, 0.3});
  second.push_back({0, 0, 4, 2, kInf});
  for (const Box& box : random_rotated_boxes(301, 41)) first.push_back(box);
  for (const Box& box : random_rotated_boxes(257, 42)) second.push_back(box);
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor a = boxes_of(first, dtype), b = boxes_of(second, dtype);
    const Tensor cpu = box_iou_rotated(a, b);
    const Tensor gpu = box_iou_rotated(a.cuda(), b.cuda());
    CHECK(gpu.is_cuda());
    CHECK(gpu.dtype() == dtype);
    int nan_mismatches = 0;
    const double diff = max_diff_nan_aware(gpu.cpu(), cpu, nan_mismatches);
    MESSAGE("max |CUDA - CPU| = " << diff);
    CHECK(nan_mismatches == 0);
    CHECK(diff <= (dtype == kFloat32 ? 1e-5 : 1e-12));
    // The exact answers hold on the GPU too: identical boxes give 1, shared edges and corners 0.
    const std::vector<double> values = gpu.cpu().to_vector<double>();
    const int64_t m = b.size(0);
    CHECK(values[0 * m + 0] == 1.0);
    for (int64_t k : {5, 6, 7, 8, 9, 10}) CHECK(values[k * m + k] == 0.0);
  }
}

MINIDET_CUDA_TEST_CASE("cuda/box_iou_rotated: non-contiguous and empty inputs on the GPU") {
  const Tensor a = boxes_of(random_rotated_boxes(9, 51)), b = boxes_of(random_rotated_boxes(13, 52));
  const Tensor a_strided = a.cuda().t().contiguous().t();
  REQUIRE(!a_strided.is_contiguous());
  const Tensor gpu = box_iou_rotated(a_strided, b.cuda());
  CHECK(test::max_abs_diff(gpu.cpu(), box_iou_rotated(a, b)) <= 1e-12);
  const Tensor none = box_iou_rotated(zeros({0, 5}, Device::cuda()), b.to(kFloat32).cuda());
  CHECK(none.sizes() == Shape{0, 13});
  CHECK(none.is_cuda());
}
