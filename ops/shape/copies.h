// Differentiable copies and conversions: the recording counterparts of Tensor::contiguous, clone and to.
//
//   y = contiguous(x)      dx = dy      (returns x itself, unrecorded, when x is already contiguous)
//   y = clone(x)           dx = dy      (always a new buffer)
//   y = to(x, device)      dx = dy moved back to x's device
//   y = to(x, dtype)       dx = dy converted back to x's dtype; a conversion to a non-floating dtype
//                                       (int64, bool) is not differentiable and is not recorded
//
// Unlike the views in views.h, the output never shares storage with x (except contiguous/to when they
// have nothing to do: then they return x itself, like PyTorch).
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor to(const Tensor& x, const Device& device);
Tensor to(const Tensor& x, DType dtype);
Tensor to(const Tensor& x, const TensorOptions& options);

}  // namespace minidet
