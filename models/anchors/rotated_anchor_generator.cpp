// RotatedAnchorGenerator: cell anchors on the host (AnchorGenerator's w and h times the angles), grid
// anchors on the device by broadcasting them over the cell offsets (math and ordering in
// rotated_anchor_generator.h).
#include "models/anchors/rotated_anchor_generator.h"

#include <cmath>

#include "core/factories.h"
#include "models/box_coder/rotated_box_coder.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"

namespace minidet::models {
namespace {

// The shared checks of sizes and ratios are AnchorGenerator's; its errors are re-thrown naming this class,
// so a reader who built a RotatedAnchorGenerator sees which constructor refused. (Returning the prvalue
// needs no move: AnchorGenerator holds a mutex and cannot move, C++17 elides the copy.)
AnchorGenerator make_axis_aligned(std::vector<std::vector<double>> sizes,
                                  std::vector<std::vector<double>> aspect_ratios) {
  try {
    return AnchorGenerator(std::move(sizes), std::move(aspect_ratios));
  } catch (const Error& error) {
    throw Error("RotatedAnchorGenerator: " + error.message(), error.file(), error.line());
  }
}

// Two angles name the same box when they differ by a multiple of pi: their difference normalises to 0 (or to
// within rounding of it, either side).
bool same_box_angle(double a, double b) { return std::abs(normalize_angle(a - b)) < 1e-9; }

}  // namespace

RotatedAnchorGenerator::RotatedAnchorGenerator(std::vector<std::vector<double>> sizes,
                                               std::vector<std::vector<double>> aspect_ratios,
                                               std::vector<std::vector<double>> angles)
    : axis_aligned_(make_axis_aligned(std::move(sizes), std::move(aspect_ratios))), angles_(std::move(angles)) {
  MINIDET_CHECK(static_cast<int64_t>(angles_.size()) == num_levels(),
                "RotatedAnchorGenerator: expected one list of angles per level of sizes, got ", num_levels(),
                " levels of sizes and ", angles_.size(), " of angles");
  for (size_t level = 0; level < angles_.size(); ++level) {
    std::vector<double>& level_angles = angles_[level];
    MINIDET_CHECK(!level_angles.empty(), "RotatedAnchorGenerator: level ", level,
                  " has no angles; every level needs at least one (use {0} for upright anchors)");
    for (double& angle : level_angles) {
      MINIDET_CHECK(std::isfinite(angle), "RotatedAnchorGenerator: expected finite angles (radians), got ", angle,
                    " at level ", level);
      angle = normalize_angle(angle);
    }
    for (size_t i = 0; i < level_angles.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        MINIDET_CHECK(!same_box_angle(level_angles[i], level_angles[j]), "RotatedAnchorGenerator: angles ", j,
                      " and ", i, " of level ", level, " name the same box (both normalise to ", level_angles[j],
                      " rad: a box is the same after a += pi); they would give identical anchors. Note that -pi/2 "
                      "and pi/2, both in detectron2's default angles, are one angle here");
  }
}

int64_t RotatedAnchorGenerator::num_anchors_per_location(int64_t level) const {
  MINIDET_CHECK(level >= 0 && level < num_levels(), "RotatedAnchorGenerator: level ", level, " out of range [0, ",
                num_levels(), ")");
  return axis_aligned_.num_anchors_per_location(level) * static_cast<int64_t>(angles_[level].size());
}

const std::vector<double>& RotatedAnchorGenerator::angles(int64_t level) const {
  MINIDET_CHECK(level >= 0 && level < num_levels(), "RotatedAnchorGenerator: level ", level, " out of range [0, ",
                num_levels(), ")");
  return angles_[level];
}

Tensor RotatedAnchorGenerator::cell_anchors(int64_t level, const TensorOptions& options) const {
  const int64_t count = num_anchors_per_location(level);
  MINIDET_CHECK(is_floating(options.dtype), "RotatedAnchorGenerator: expected a floating dtype for anchors, got ",
                options.dtype);
  // The axis-aligned cell anchors (x1, y1, x2, y2), already rounded and in (ratio, size) order; their sides
  // are integers, exact in float64. Angles are kept in float64 until the final conversion.
  const std::vector<double> corners = axis_aligned_.cell_anchors(level, kFloat64).to_vector<double>();
  std::vector<double> rows;
  rows.reserve(static_cast<size_t>(count) * 5);
  for (size_t k = 0; k + 3 < corners.size(); k += 4) {
    const double w = corners[k + 2] - corners[k], h = corners[k + 3] - corners[k + 1];
    for (double angle : angles_[level])
      for (double v : {0.0, 0.0, w, h, angle}) rows.push_back(v);
  }
  return from_vector<double>(rows, {count, 5}).to(options);
}

Tensor RotatedAnchorGenerator::grid_anchors(int64_t level, int64_t feature_h, int64_t feature_w, int64_t stride_h,
                                            int64_t stride_w, const TensorOptions& options) {
  return cache_.get(level, feature_h, feature_w, stride_h, stride_w, options, [&] {
    const Tensor cell = cell_anchors(level, options);  // (A, 5)
    // Each cell's top-left corner moves the centre; w, h and the angle stay: (x, y, 0, 0, 0) per cell.
    const auto [grid_x, grid_y] = detail::cell_offsets(feature_h, feature_w, stride_h, stride_w, options);
    const Tensor zero = zeros({feature_h, feature_w}, options);
    const Tensor shifts = stack({grid_x, grid_y, zero, zero, zero}, -1).view({feature_h * feature_w, 1, 5});
    // (h*w, 1, 5) + (1, A, 5): every anchor at every position, position-major.
    return add(shifts, cell.unsqueeze(0)).view({-1, 5});
  });
}

Tensor RotatedAnchorGenerator::anchors(int64_t image_h, int64_t image_w,
                                       const std::vector<std::pair<int64_t, int64_t>>& feature_sizes,
                                       const TensorOptions& options) {
  // The stride rule is AnchorGenerator's (torchvision's): integer division of the image by the feature map.
  return detail::anchors_over_levels("RotatedAnchorGenerator", *this, image_h, image_w, feature_sizes, options);
}

size_t RotatedAnchorGenerator::cache_size() const { return cache_.size(); }

}  // namespace minidet::models
