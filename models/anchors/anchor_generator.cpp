// AnchorGenerator: cell anchors on the host (A boxes), grid anchors on the device by broadcasting them over
// the cell offsets (math and ordering in anchor_generator.h).
#include "models/anchors/anchor_generator.h"

#include <cmath>

#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"

namespace minidet::models {
namespace {

void check_positive_lists(const std::vector<std::vector<double>>& lists, const char* what) {
  for (size_t level = 0; level < lists.size(); ++level) {
    MINIDET_CHECK(!lists[level].empty(), "AnchorGenerator: level ", level, " has no ", what,
                  "; every level needs at least one (a detector without anchors cannot propose anything)");
    for (double v : lists[level])
      MINIDET_CHECK(std::isfinite(v) && v > 0, "AnchorGenerator: expected positive finite ", what, ", got ", v,
                    " at level ", level);
  }
}

}  // namespace

AnchorGenerator::AnchorGenerator(std::vector<std::vector<double>> sizes,
                                 std::vector<std::vector<double>> aspect_ratios)
    : sizes_(std::move(sizes)), aspect_ratios_(std::move(aspect_ratios)) {
  MINIDET_CHECK(!sizes_.empty(), "AnchorGenerator: expected sizes for at least one feature level, got none");
  MINIDET_CHECK(sizes_.size() == aspect_ratios_.size(), "AnchorGenerator: expected one list of aspect ratios per level of sizes, got ",
                sizes_.size(), " levels of sizes and ", aspect_ratios_.size(), " of aspect ratios");
  check_positive_lists(sizes_, "sizes");
  check_positive_lists(aspect_ratios_, "aspect ratios");
}

int64_t AnchorGenerator::num_anchors_per_location(int64_t level) const {
  MINIDET_CHECK(level >= 0 && level < num_levels(), "AnchorGenerator: level ", level, " out of range [0, ",
                num_levels(), ")");
  return static_cast<int64_t>(sizes_[level].size() * aspect_ratios_[level].size());
}

Tensor AnchorGenerator::cell_anchors(int64_t level, const TensorOptions& options) const {
  const int64_t count = num_anchors_per_location(level);
  MINIDET_CHECK(is_floating(options.dtype), "AnchorGenerator: expected a floating dtype for anchors, got ",
                options.dtype);
  // float32 arithmetic in torchvision's order, then round half to even (nearbyint in the default rounding
  // mode, like torch.round), so both give the same integers even where a half-size lands near .5.
  std::vector<float> corners;
  corners.reserve(static_cast<size_t>(count) * 4);
  for (double ratio : aspect_ratios_[level]) {
    const float h_ratio = std::sqrt(static_cast<float>(ratio));
    const float w_ratio = 1.0f / h_ratio;
    for (double size : sizes_[level]) {
      const float w = w_ratio * static_cast<float>(size), h = h_ratio * static_cast<float>(size);
      for (float v : {-w, -h, w, h}) corners.push_back(std::nearbyint(v / 2.0f));
    }
  }
  return from_vector<float>(corners, {count, 4}).to(options);
}

Tensor AnchorGenerator::grid_anchors(int64_t level, int64_t feature_h, int64_t feature_w, int64_t stride_h,
                                     int64_t stride_w, const TensorOptions& options) {
  return cache_.get(level, feature_h, feature_w, stride_h, stride_w, options, [&] {
    const Tensor cell = cell_anchors(level, options);  // (A, 4)
    // Offsets of each cell's top-left corner, (h, w) grids of x and y, stacked as (x, y, x, y) per cell.
    const auto [grid_x, grid_y] = detail::cell_offsets(feature_h, feature_w, stride_h, stride_w, options);
    const Tensor shifts = stack({grid_x, grid_y, grid_x, grid_y}, -1).view({feature_h * feature_w, 1, 4});
    // (h*w, 1, 4) + (1, A, 4): every anchor at every position, position-major.
    return add(shifts, cell.unsqueeze(0)).view({-1, 4});
  });
}

Tensor AnchorGenerator::anchors(int64_t image_h, int64_t image_w,
                                const std::vector<std::pair<int64_t, int64_t>>& feature_sizes,
                                const TensorOptions& options) {
  return detail::anchors_over_levels("AnchorGenerator", *this, image_h, image_w, feature_sizes, options);
}

size_t AnchorGenerator::cache_size() const { return cache_.size(); }

}  // namespace minidet::models
