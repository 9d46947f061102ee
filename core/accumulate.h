// add_into(dst, src): dst += src, in place, for gradient accumulation.
//
// The autograd engine sums the gradients that reach one tensor along several paths, and AccumulateGrad adds
// each backward's gradient into a leaf's .grad. Both need exactly this, on both devices, before any op
// exists, which is why it lives in core next to copy_ and fill_.
#pragma once

#include "core/tensor.h"

namespace minidet {

// dst and src: same device and dtype; src must broadcast to dst's shape. Bumps dst's version.
void add_into(const Tensor& dst, const Tensor& src);

namespace detail {
void add_into_cpu(const Tensor& dst, const Tensor& src);
#if MINIDET_WITH_CUDA
void add_into_cuda(const Tensor& dst, const Tensor& src);
#endif
}  // namespace detail

}  // namespace minidet
