// RotatedAnchorGenerator: the anchor count and order, agreement with AnchorGenerator at angle 0, normalised
// angles, the grid order and strides, several levels, the read-only cache, errors and CUDA parity.
#include <cmath>
#include <vector>

#include "core/factories.h"
#include "models/anchors/anchor_generator.h"
#include "models/anchors/rotated_anchor_generator.h"
#include "models/box_coder/rotated_box_coder.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"
#include "tests/support.h"

using namespace minidet;
using models::AnchorGenerator;
using models::RotatedAnchorGenerator;

namespace {

constexpr double kPi = 3.14159265358979323846;

std::vector<double> row(const Tensor& anchors, int64_t index) {
  return anchors.narrow(0, index, 1).to_vector<double>();
}

// torchvision-style (x1, y1, x2, y2) rows to (cx, cy, w, h, 0).
Tensor xyxy_to_rotated(const Tensor& boxes) {
  const Tensor x1 = select(boxes, -1, 0), y1 = select(boxes, -1, 1), x2 = select(boxes, -1, 2),
               y2 = select(boxes, -1, 3);
  return stack({mul(add(x1, x2), 0.5), mul(add(y1, y2), 0.5), sub(x2, x1), sub(y2, y1), zeros_like(x1)}, -1);
}

}  // namespace

TEST_CASE("values/rotated_anchors: ratios x sizes x angles cell anchors in ratio size angle order") {
  const std::vector<double> angles = {-kPi / 3, 0.0, kPi / 6};
  RotatedAnchorGenerator generator({{16, 32, 64}}, {{0.5, 1.0, 2.0}}, {angles});
  CHECK(generator.num_levels() == 1);
  CHECK(generator.num_anchors_per_location(0) == 3 * 3 * 3);
  const Tensor cell = generator.cell_anchors(0, kFloat64);
  CHECK(cell.sizes() == Shape{27, 5});
  CHECK(generator.cell_anchors(0).dtype() == kFloat32);
  // w, h from torchvision's rounded anchors: ratio 0.5 size 16 is (-11, -6, 11, 6), so 22 x 12.
  const std::vector<double> sides = {22, 12, 46, 22, 90, 46,  16, 16, 32, 32,
                                     64, 64, 12, 22, 22, 46,  46, 90};
  for (int64_t ratio = 0; ratio < 3; ++ratio)
    for (int64_t size = 0; size < 3; ++size)
      for (int64_t angle = 0; angle < 3; ++angle) {
        const int64_t k = (ratio * 3 + size) * 3 + angle;
        CAPTURE(k);
        const double w = sides[2 * (ratio * 3 + size)], h = sides[2 * (ratio * 3 + size) + 1];
        CHECK(row(cell, k) == std::vector<double>{0, 0, w, h, angles[angle]});
      }
  // Every anchor of ratio r has h / w close to r and area close to s^2 (the rounding moves a side by < 1).
  const std::vector<double> c = cell.to_vector<double>();
  CHECK(c[2] * c[3] == doctest::Approx(16.0 * 16.0).epsilon(0.05));
}

TEST_CASE("values/rotated_anchors: the angle-0 anchors are the axis-aligned anchors as (cx, cy, w, h, 0)") {
  // Sizes and ratios whose half-sides round (25 x ratio 0.5: 35.36 x 17.68 -> 36 x 18), several levels,
  // different strides along x and y: the top-left-corner centring must agree, not only the sizes.
  const std::vector<std::vector<double>> sizes = {{16, 25}, {40, 64}}, ratios = {{0.5, 1.0, 2.0}, {0.25, 1.0}};
  AnchorGenerator axis_aligned(sizes, ratios);
  RotatedAnchorGenerator only_upright(sizes, ratios, {{0.0}, {0.0}});
  const std::vector<std::pair<int64_t, int64_t>> features = {{6, 8}, {3, 4}};
  const Tensor expected = xyxy_to_rotated(axis_aligned.anchors(48, 70, features, kFloat64));
  const Tensor rotated = only_upright.anchors(48, 70, features, kFloat64);
  CHECK(rotated.sizes() == expected.sizes());
  CHECK(rotated.to_vector<double>() == expected.to_vector<double>());
  // With several angles, every angle-0 anchor (index k * angles + 1 here) is the axis-aligned anchor k.
  RotatedAnchorGenerator three(sizes, ratios, {{-kPi / 4, 0.0, kPi / 4}, {0.0, 1.0, 2.0}});
  const Tensor all = three.anchors(48, 70, features, kFloat64);
  CHECK(all.size(0) == 3 * expected.size(0));
  const Tensor level0 = all.narrow(0, 0, 6 * 8 * 18).view({-1, 3, 5});
  CHECK(select(level0, 1, 1).to_vector<double>() == expected.narrow(0, 0, 6 * 8 * 6).to_vector<double>());
  const Tensor level1 = all.narrow(0, 6 * 8 * 18, 3 * 4 * 12).view({-1, 3, 5});
  CHECK(select(level1, 1, 0).to_vector<double>() == expected.narrow(0, 6 * 8 * 6, 3 * 4 * 4).to_vector<double>());
}

TEST_CASE("values/rotated_anchors: grid order row column anchor with centres on the cell corners") {
  RotatedAnchorGenerator generator({{16, 32}}, {{1.0}}, {{0.0, kPi / 2}});
  // Image 32 x 48, feature map 4 x 6: stride 8. Anchor k at cell (y, x) is row (y * 6 + x) * 4 + k.
  const Tensor anchors = generator.anchors(32, 48, {{4, 6}}, kFloat64);
  CHECK(anchors.sizes() == Shape{4 * 6 * 4, 5});
  CHECK(row(anchors, 0) == std::vector<double>{0, 0, 16, 16, 0});
  CHECK(row(anchors, 1) == std::vector<double>{0, 0, 16, 16, -kPi / 2});  // pi/2 is stored as -pi/2
  // Cell (1, 2): centre (x, y) = (16, 8); anchor 2 is size 32 at angle 0.
  CHECK(row(anchors, (1 * 6 + 2) * 4 + 2) == std::vector<double>{16, 8, 32, 32, 0});
  // The last anchor: cell (3, 5), centre (40, 24), size 32 at -pi/2.
  CHECK(row(anchors, 4 * 6 * 4 - 1) == std::vector<double>{40, 24, 32, 32, -kPi / 2});
  // Strides (10, 8) by integer division of a 31 x 64 image over 3 x 8 cells.
  RotatedAnchorGenerator one({{10}}, {{2.0}}, {{0.5}});
  const Tensor grid = one.anchors(31, 64, {{3, 8}}, kFloat64);
  CHECK(grid.sizes() == Shape{24, 5});
  // Ratio 2, size 10: torchvision's anchor (-4, -7, 4, 7), so w = 8, h = 14.
  CHECK(row(grid, 2 * 8 + 3) == std::vector<double>{3 * 8, 2 * 10, 8, 14, 0.5});
  CHECK(!grid.requires_grad());
}

TEST_CASE("values/rotated_anchors: angles are normalised to -pi/2 <= a < pi/2 in the given order") {
  const std::vector<double> given = {kPi / 2, 3 * kPi / 4, -kPi, 2.0, -5.0};
  RotatedAnchorGenerator generator({{8}}, {{1.0}}, {given});
  const std::vector<double>& stored = generator.angles(0);
  REQUIRE(stored.size() == given.size());
  for (size_t k = 0; k < given.size(); ++k) {
    CAPTURE(given[k]);
    CHECK(stored[k] == models::normalize_angle(given[k]));
    CHECK(stored[k] >= -kPi / 2);
    CHECK(stored[k] < kPi / 2);
  }
  CHECK(stored[0] == -kPi / 2);
  CHECK(stored[1] == doctest::Approx(-kPi / 4).epsilon(1e-15));
  CHECK(stored[2] == 0.0);
  // The anchors carry them in float64 exactly, and in float32 up to float32 rounding.
  CHECK(select(generator.cell_anchors(0, kFloat64), 1, 4).to_vector<double>() == stored);
  const std::vector<float> in_float = select(generator.cell_anchors(0, kFloat32), 1, 4).to_vector<float>();
  for (size_t k = 0; k < stored.size(); ++k) CHECK(in_float[k] == static_cast<float>(stored[k]));
}

TEST_CASE("values/rotated_anchors: several levels concatenate and the cache returns the same read-only tensor") {
  RotatedAnchorGenerator generator({{16}, {32, 64}}, {{1.0}, {0.5, 2.0}}, {{0.0, 1.0}, {-1.0, 0.0, 1.0}});
  CHECK(generator.num_levels() == 2);
  CHECK(generator.num_anchors_per_location(0) == 2);
  CHECK(generator.num_anchors_per_location(1) == 12);
  const Tensor anchors = generator.anchors(64, 64, {{8, 8}, {4, 4}}, kFloat64);
  CHECK(anchors.sizes() == Shape{8 * 8 * 2 + 4 * 4 * 12, 5});
  CHECK(anchors.dtype() == kFloat64);
  // Level 1 starts after level 0's 128 anchors: ratio 0.5 size 32 (torchvision (-23, -11, 23, 11)) at -1.
  CHECK(row(anchors, 128) == std::vector<double>{0, 0, 46, 22, -1.0});
  // Its cell (1, 1) has stride 16: centre (16, 16).
  CHECK(row(anchors, 128 + (1 * 4 + 1) * 12) == std::vector<double>{16, 16, 46, 22, -1.0});
  CHECK(generator.cache_size() == 2);
  const Tensor again = generator.grid_anchors(0, 8, 8, 8, 8, kFloat64);
  CHECK(again.is_same(generator.grid_anchors(0, 8, 8, 8, 8, kFloat64)));
  CHECK(again.is_read_only());
  CHECK_THROWS_CONTAINING(again.fill_(0.0), "RotatedAnchorGenerator's cached grid anchors");
  CHECK(row(again, 0) == std::vector<double>{0, 0, 16, 16, 0});  // unchanged by the refused write
  CHECK(generator.cache_size() == 2);
  (void)generator.grid_anchors(0, 8, 8, 8, 8, kFloat32);            // another dtype: another entry
  (void)generator.anchors(64, 64, {{16, 16}, {4, 4}}, kFloat64);   // another feature size on level 0
  CHECK(generator.cache_size() == 4);
  // A single level returns the cached tensor itself.
  RotatedAnchorGenerator single({{16}}, {{1.0}}, {{0.0}});
  CHECK(single.anchors(32, 32, {{4, 4}}).is_same(single.grid_anchors(0, 4, 4, 8, 8)));
}

TEST_CASE("errors/rotated_anchors: no anchors bad values duplicate angles and mismatched levels") {
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({}, {}, {}), "expected sizes for at least one feature level");
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({{}}, {{1.0}}, {{0.0}}), "RotatedAnchorGenerator: ");
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({{}}, {{1.0}}, {{0.0}}), "level 0 has no sizes");
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({{16}}, {{-1.0}}, {{0.0}}), "expected positive finite aspect ratios");
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({{16}}, {{1.0}}, {}), "one list of angles per level");
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({{16}, {32}}, {{1.0}, {1.0}}, {{0.0}}),
                          "one list of angles per level");
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({{16}}, {{1.0}}, {{}}), "level 0 has no angles");
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({{16}}, {{1.0}}, {{std::nan("")}}), "expected finite angles");
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({{16}}, {{1.0}}, {{INFINITY}}), "expected finite angles");
  // -pi/2 and pi/2 (detectron2's default list has both), and 0 and pi, are the same boxes.
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({{16}}, {{1.0}}, {{-kPi / 2, 0.0, kPi / 2}}), "name the same box");
  CHECK_THROWS_CONTAINING(RotatedAnchorGenerator({{16}}, {{1.0}}, {{0.0, 1.0, kPi}}), "angles 0 and 2 of level 0");
  RotatedAnchorGenerator generator({{16}}, {{1.0}}, {{0.0}});
  CHECK_THROWS_CONTAINING(generator.anchors(32, 32, {{4, 4}, {2, 2}}), "expected 1 feature map sizes");
  CHECK_THROWS_CONTAINING(generator.anchors(32, 32, {{0, 4}}), "expected a feature map between 1 x 1");
  CHECK_THROWS_CONTAINING(generator.anchors(32, 32, {{64, 4}}), "expected a feature map between 1 x 1");
  CHECK_THROWS_CONTAINING(generator.anchors(0, 32, {{4, 4}}), "expected a non-empty image");
  CHECK_THROWS_CONTAINING(generator.grid_anchors(0, 4, 0, 8, 8), "expected a non-empty feature map");
  CHECK_THROWS_CONTAINING(generator.grid_anchors(0, 4, 4, 8, -1), "expected positive strides");
  CHECK_THROWS_CONTAINING(generator.num_anchors_per_location(1), "RotatedAnchorGenerator: level 1 out of range");
  CHECK_THROWS_CONTAINING(generator.angles(-1), "level -1 out of range");
  CHECK_THROWS_CONTAINING(generator.cell_anchors(0, kInt64), "RotatedAnchorGenerator: expected a floating dtype");
  CHECK(generator.cache_size() == 0);
}

MINIDET_CUDA_TEST_CASE("cuda/rotated_anchors: made on the device equal to the CPU and cached per device") {
  RotatedAnchorGenerator generator({{16, 32, 64}, {128}}, {{0.5, 1.0, 2.0}, {1.0}},
                                   {{-kPi / 3, 0.0, kPi / 3}, {0.0, kPi / 4}});
  const std::vector<std::pair<int64_t, int64_t>> features = {{16, 20}, {4, 5}};
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor on_cpu = generator.anchors(128, 160, features, dtype);
    const Tensor on_gpu = generator.anchors(128, 160, features, TensorOptions(dtype, Device::cuda()));
    CHECK(on_gpu.is_cuda());
    CHECK(on_gpu.dtype() == dtype);
    CHECK(on_gpu.to_vector<double>() == on_cpu.to_vector<double>());
  }
  CHECK(generator.cache_size() == 8);
  const Tensor cached = generator.grid_anchors(1, 4, 5, 32, 32, TensorOptions(kFloat32, Device::cuda()));
  CHECK(cached.is_cuda());
  CHECK(cached.is_same(generator.grid_anchors(1, 4, 5, 32, 32, TensorOptions(kFloat32, Device::cuda()))));
  CHECK(cached.is_read_only());
  CHECK_THROWS_CONTAINING(cached.fill_(0.0), "RotatedAnchorGenerator's cached grid anchors");
  CHECK(generator.cache_size() == 8);
}
