// AnchorGenerator: the reference boxes of a detector, a fixed set of A = sizes x aspect ratios boxes
// repeated at every position of each feature map, following torchvision's AnchorGenerator exactly.
//
// Cell anchors, per feature level, centred on (0, 0), for every ratio r (outer loop) and size s (inner):
//   h_ratio = sqrt(r),  w_ratio = 1 / h_ratio,  w = w_ratio * s,  h = h_ratio * s        (so h / w = r and
//   anchor = round((-w, -h, w, h) / 2)                                                   w * h = s^2)
// computed in float32 as torchvision does and rounded half to even (torch.round), so the two libraries give
// identical anchors: for {16, 32, 64} x {0.5, 1, 2} the first is (-11, -6, 11, 6), the ratio-1 ones
// (-8, -8, 8, 8), (-16, -16, 16, 16), (-32, -32, 32, 32).
//
// Grid anchors for a feature map of h x w cells with stride (stride_h, stride_w) pixels:
//   anchors[(y * w + x) * A + a] = cell_anchor[a] + (x * stride_w, y * stride_h, x * stride_w, y * stride_h)
// i.e. anchors are centred on the top-left corner of their cell (torchvision's convention), ordered by row,
// then column, then anchor: the order of an RPN head output (N, A, h, w) permuted to (N, h, w, A).
//
// For an image (padded batch) of size (H, W) and one feature map per level, the stride of level l is
// (H / h_l, W / w_l) in integer division (torchvision's rule) and anchors() returns every level's grid
// anchors concatenated: (sum_l h_l * w_l * A_l, 4), the same for every image of the batch.
//
// The grid anchors are built on the requested device (arange and broadcast additions, no host loop) and
// cached per (level, feature size, stride, dtype, device): a training loop at a fixed image size builds them
// once. The cached tensor is returned itself, not a copy, so it is read-only (Tensor::make_read_only): a write
// to it throws instead of changing every later caller's anchors. The cache is guarded by a
// mutex. Anchors are constants: they never require grad.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "models/anchors/anchor_levels.h"

namespace minidet::models {

class AnchorGenerator {
 public:
  // One list of sizes and one of aspect ratios (height / width) per feature level; all positive, finite,
  // and each list non-empty.
  AnchorGenerator(std::vector<std::vector<double>> sizes, std::vector<std::vector<double>> aspect_ratios);

  int64_t num_levels() const { return static_cast<int64_t>(sizes_.size()); }
  // A = sizes x ratios of the level: what the RPN head's objectness conv must output per position.
  int64_t num_anchors_per_location(int64_t level) const;

  // (A, 4) anchors of one level centred on (0, 0) (see the formula above).
  Tensor cell_anchors(int64_t level, const TensorOptions& options = {}) const;
  // (feature_h * feature_w * A, 4) anchors of one level over a feature map; cached.
  Tensor grid_anchors(int64_t level, int64_t feature_h, int64_t feature_w, int64_t stride_h, int64_t stride_w,
                      const TensorOptions& options = {});
  // Every level's grid anchors for an image of image_h x image_w pixels and one (h, w) feature size per
  // level, concatenated in level order.
  Tensor anchors(int64_t image_h, int64_t image_w, const std::vector<std::pair<int64_t, int64_t>>& feature_sizes,
                 const TensorOptions& options = {});

  // How many grid-anchor tensors the cache holds (for tests).
  size_t cache_size() const;

 private:
  std::vector<std::vector<double>> sizes_, aspect_ratios_;
  detail::GridAnchorCache cache_{"AnchorGenerator",
                                 "the AnchorGenerator's cached grid anchors, returned to every caller at this size "
                                 "(models/anchors/anchor_generator.h)"};
};

}  // namespace minidet::models
