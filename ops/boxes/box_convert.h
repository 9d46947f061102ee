// Box format conversions between corners and centre-size, composed from differentiable slicing and
// elementwise ops (their backward is the chain rule through those, i.e. the transpose of a 4 x 4 linear map).
//
//   box_xyxy_to_cxcywh:  (x1, y1, x2, y2) -> (cx, cy, w, h) = ((x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1)
//   box_cxcywh_to_xyxy:  (cx, cy, w, h) -> (x1, y1, x2, y2) = (cx - w/2, cy - h/2, cx + w/2, cy + h/2)
//
// Both are linear, so backward is exact: for xyxy -> cxcywh, d/dx1 = dcx / 2 - dw and d/dx2 = dcx / 2 + dw;
// for cxcywh -> xyxy, d/dcx = dx1 + dx2 and d/dw = (dx2 - dx1) / 2 (and the same along y). Widths are not
// clamped: an inverted box converts to a negative width and back. Take (..., 4), float32 or float64, any
// device; the output is a new (..., 4) tensor.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor box_xyxy_to_cxcywh(const Tensor& boxes);
Tensor box_cxcywh_to_xyxy(const Tensor& boxes);

}  // namespace minidet
