// Per-box geometry, composed from differentiable elementwise and view ops (no kernels of their own: their
// backward is the chain rule through relu, mul and clamp, already gradchecked).
//
//   box_area(b)                 (..., 4) -> (...):  relu(x2 - x1) * relu(y2 - y1)
//       An inverted box (x2 < x1 or y2 < y1) covers nothing: area 0, not negative (torchvision returns the
//       signed product; the two agree on every valid box). This is box_math::box_area, bit for bit, so
//       box_area and box_iou (and nms) measure a box the same way.
//       Backward: d/dx2 = h, d/dx1 = -h, d/dy2 = w, d/dy1 = -w where w, h > 0; 0 for a side whose extent
//       is <= 0 (relu's derivative at 0 is 0).
//
//   clip_boxes_to_image(b, height, width)   (..., 4) -> (..., 4)
//       x1, x2 clamped to [0, width], y1, y2 to [0, height] (torchvision's rule; continuous pixels, so the
//       right edge is `width`, not width - 1). Backward: the gradient passes where the coordinate was inside
//       its range, bounds included, and is 0 where it was clamped (clamp's rule).
//
//   remove_small_boxes(b, min_size)         (N, 4) -> (K,) int64, not differentiable
//       The indices, increasing, of the boxes with x2 - x1 >= min_size and y2 - y1 >= min_size. A box with
//       a NaN coordinate is removed (NaN >= min_size is false). On CUDA the count K must reach the host to
//       size the output: one synchronisation (see nonzero).
//
// All take float32 or float64 on any device; empty inputs give empty outputs of the right shape.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor box_area(const Tensor& boxes);
Tensor clip_boxes_to_image(const Tensor& boxes, double height, double width);
Tensor remove_small_boxes(const Tensor& boxes, double min_size);

}  // namespace minidet
