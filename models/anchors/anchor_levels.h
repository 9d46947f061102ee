// What AnchorGenerator and RotatedAnchorGenerator share beyond the rows they build: the multi-level loop of
// anchors() (checks of the feature sizes, the stride rule, the concatenation) and the read-only cache of grid
// anchors behind a mutex. Errors name the class that asked (`who`).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace minidet::models::detail {

// grid(level, feature_h, feature_w, stride_h, stride_w): one level's grid anchors.
using GridAnchorsFn = std::function<Tensor(int64_t, int64_t, int64_t, int64_t, int64_t)>;

// anchors() of both generators: one (h, w) feature size per level, each between 1 x 1 and the image size, the
// stride of level l (H / h_l, W / w_l) in integer division (torchvision's rule), and the levels' grid anchors
// concatenated in level order (a single level is returned as it is: the cached tensor itself).
Tensor anchors_over_levels(const char* who, int64_t num_levels, int64_t image_h, int64_t image_w,
                           const std::vector<std::pair<int64_t, int64_t>>& feature_sizes, const GridAnchorsFn& grid);

// The same for a generator with num_levels() and grid_anchors(level, h, w, stride_h, stride_w, options): what
// AnchorGenerator::anchors and RotatedAnchorGenerator::anchors call.
template <typename Generator>
Tensor anchors_over_levels(const char* who, Generator& generator, int64_t image_h, int64_t image_w,
                           const std::vector<std::pair<int64_t, int64_t>>& feature_sizes,
                           const TensorOptions& options) {
  return anchors_over_levels(
      who, generator.num_levels(), image_h, image_w, feature_sizes,
      [&](int64_t level, int64_t feature_h, int64_t feature_w, int64_t stride_h, int64_t stride_w) {
        return generator.grid_anchors(level, feature_h, feature_w, stride_h, stride_w, options);
      });
}

// The offsets of each cell's top-left corner over a feature map of feature_h x feature_w cells: (x, y) =
// (column * stride_w, row * stride_h) as two (feature_h, feature_w) grids (broadcast views), on `options`.
std::pair<Tensor, Tensor> cell_offsets(int64_t feature_h, int64_t feature_w, int64_t stride_h, int64_t stride_w,
                                       const TensorOptions& options);

// The grid anchors of one generator, cached per (level, feature size, stride, dtype, device). get() checks the
// feature size and strides, then returns the cached tensor or builds it (under NoGradGuard, holding the lock),
// marks it read-only with `read_only_reason` (a string literal) and keeps it.
class GridAnchorCache {
 public:
  GridAnchorCache(const char* who, const char* read_only_reason) : who_(who), read_only_reason_(read_only_reason) {}

  Tensor get(int64_t level, int64_t feature_h, int64_t feature_w, int64_t stride_h, int64_t stride_w,
             const TensorOptions& options, const std::function<Tensor()>& build);
  // How many grid-anchor tensors the cache holds.
  size_t size() const;

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int>;
  const char* who_;
  const char* read_only_reason_;
  std::map<Key, Tensor> cache_;
  mutable std::mutex mutex_;
};

}  // namespace minidet::models::detail
