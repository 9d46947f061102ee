// The multi-level loop and the grid-anchor cache shared by AnchorGenerator and RotatedAnchorGenerator.
#include "models/anchors/anchor_levels.h"

#include "core/factories.h"
#include "core/grad_mode.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/cat.h"

namespace minidet::models::detail {

Tensor anchors_over_levels(const char* who, int64_t num_levels, int64_t image_h, int64_t image_w,
                           const std::vector<std::pair<int64_t, int64_t>>& feature_sizes, const GridAnchorsFn& grid) {
  MINIDET_CHECK(static_cast<int64_t>(feature_sizes.size()) == num_levels, who, ": expected ", num_levels,
                " feature map sizes (one per level), got ", feature_sizes.size());
  MINIDET_CHECK(image_h > 0 && image_w > 0, who, ": expected a non-empty image, got ", image_h, " x ", image_w);
  std::vector<Tensor> levels;
  for (int64_t level = 0; level < num_levels; ++level) {
    const auto [feature_h, feature_w] = feature_sizes[level];
    MINIDET_CHECK(feature_h > 0 && feature_w > 0 && feature_h <= image_h && feature_w <= image_w, who,
                  ": expected a feature map between 1 x 1 and the image size ", image_h, " x ", image_w, ", got ",
                  feature_h, " x ", feature_w, " at level ", level);
    levels.push_back(grid(level, feature_h, feature_w, image_h / feature_h, image_w / feature_w));
  }
  if (levels.size() == 1) return levels[0];
  NoGradGuard constants;
  return cat(levels, 0);
}

std::pair<Tensor, Tensor> cell_offsets(int64_t feature_h, int64_t feature_w, int64_t stride_h, int64_t stride_w,
                                       const TensorOptions& options) {
  const Tensor shift_x = mul(arange(0, feature_w, 1, options), static_cast<double>(stride_w)).view({1, feature_w});
  const Tensor shift_y = mul(arange(0, feature_h, 1, options), static_cast<double>(stride_h)).view({feature_h, 1});
  return {shift_x.expand({feature_h, feature_w}), shift_y.expand({feature_h, feature_w})};
}

Tensor GridAnchorCache::get(int64_t level, int64_t feature_h, int64_t feature_w, int64_t stride_h, int64_t stride_w,
                            const TensorOptions& options, const std::function<Tensor()>& build) {
  MINIDET_CHECK(feature_h > 0 && feature_w > 0, who_, ": expected a non-empty feature map, got ", feature_h, " x ",
                feature_w, " at level ", level);
  MINIDET_CHECK(stride_h > 0 && stride_w > 0, who_, ": expected positive strides, got (", stride_h, ", ", stride_w,
                ") at level ", level);
  const Key key{level, feature_h, feature_w, stride_h, stride_w, static_cast<int>(options.dtype),
                static_cast<int>(options.device.type), options.device.index};
  std::lock_guard<std::mutex> lock(mutex_);
  const auto cached = cache_.find(key);
  if (cached != cache_.end()) return cached->second;

  NoGradGuard constants;
  const Tensor anchors = build();
  anchors.make_read_only(read_only_reason_);
  cache_.emplace(key, anchors);
  return anchors;
}

size_t GridAnchorCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.size();
}

}  // namespace minidet::models::detail
