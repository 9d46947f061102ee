// Choosing elements by a boolean mask.
//
//   y = where(cond, a, b)        y = cond ? a : b elementwise; cond (bool), a and b broadcast together
//                                (NumPy rules) to y's shape.
//                                da = dy where cond, 0 elsewhere;  db = dy where !cond, 0 elsewhere
//                                (both in y's shape; the engine's sum_to folds them back to a's and b's)
//   y = masked_fill(x, mask, v)  y = mask ? v : x; mask (bool) must broadcast to x's shape; y has x's shape.
//                                dx = dy where !mask, 0 where masked (the filled value is a constant)
//   y = logical_and(a, b)        y = a && b for bool a and b, as where(a, b, a): where a is true, b's value;
//                                elsewhere a's, false. No gradient (bools carry none).
//
// a and b share dtype and device with each other (and with cond). Any dtype works; only floating inputs
// carry gradients. cond/mask get no gradient.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
inline Tensor logical_and(const Tensor& a, const Tensor& b) { return where(a, b, a); }

}  // namespace minidet
