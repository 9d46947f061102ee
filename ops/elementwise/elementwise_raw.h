// Raw (non-recording) building blocks shared by the elementwise op files: allocate the output, broadcast the
// operands, run the kernel. The differentiable ops in unary.cpp / binary.cpp / compare.cpp wrap these.
#pragma once

#include "core/tensor.h"
#include "ops/elementwise/elementwise_functors.h"

namespace minidet::ops::detail {

Tensor unary_raw(const char* name, UnaryOp op, const Tensor& x, double a = 0, double b = 0);
Tensor binary_raw(const char* name, BinaryOp op, const Tensor& a, const Tensor& b);
Tensor compare_raw(const char* name, CompareOp op, const Tensor& a, const Tensor& b);

}  // namespace minidet::ops::detail
