// Raw softmax kernels over rows (ops/reduction/row_layout.h). Every tensor is contiguous with x's shape.
// `log` picks log_softmax. The `*_kernel` functions choose CPU or CUDA by device
// (in softmax.cpp).
#pragma once

#include "core/tensor.h"
#include "ops/reduction/row_layout.h"

namespace minidet::ops::detail {

void softmax_forward_kernel(const Tensor& x, const RowLayout& layout, const Tensor& y, bool log);
void softmax_backward_kernel(const Tensor& y, const Tensor& dy, const RowLayout& layout, const Tensor& dx, bool log);

void softmax_forward_cpu(const Tensor& x, const RowLayout& layout, const Tensor& y, bool log);
void softmax_backward_cpu(const Tensor& y, const Tensor& dy, const RowLayout& layout, const Tensor& dx, bool log);
#if MINIDET_WITH_CUDA
void softmax_forward_cuda(const Tensor& x, const RowLayout& layout, const Tensor& y, bool log);
void softmax_backward_cuda(const Tensor& y, const Tensor& dy, const RowLayout& layout, const Tensor& dx, bool log);
#endif

}  // namespace minidet::ops::detail
