// Launchers for the generic elementwise kernels. Operands are already broadcast (expanded) to the output
// shape; strides may be anything. `*_kernel` picks the CPU or CUDA version by the output's device
// (defined in elementwise_raw.cpp).
#pragma once

#include "core/tensor.h"
#include "ops/elementwise/elementwise_functors.h"

namespace minidet::ops::detail {

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in, double a = 0, double b = 0);
void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& x, const Tensor& y);
void compare_kernel(CompareOp op, const Tensor& out, const Tensor& x, const Tensor& y);  // out is bool

void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& in, double a, double b);
void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& x, const Tensor& y);
void compare_cpu(CompareOp op, const Tensor& out, const Tensor& x, const Tensor& y);
#if MINIDET_WITH_CUDA
void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in, double a, double b);
void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& x, const Tensor& y);
void compare_cuda(CompareOp op, const Tensor& out, const Tensor& x, const Tensor& y);
#endif

}  // namespace minidet::ops::detail
