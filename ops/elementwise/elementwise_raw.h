// Raw (non-recording) building blocks shared by the elementwise op files: allocate the output, broadcast the
// operands, run the kernel. The differentiable ops in unary.cpp / binary.cpp / compare.cpp wrap these.
#pragma once

#include "core/tensor.h"
#include "ops/elementwise/elementwise_functors.h"

namespace minidet::ops::detail {

Tensor unary_raw(const char* name, UnaryOp op, const Tensor& x, double a = 0, double b = 0);
Tensor binary_raw(const char* name, BinaryOp op, const Tensor& a, const Tensor& b);
Tensor compare_raw(const char* name, CompareOp op, const Tensor& a, const Tensor& b);

// Whether `value` converts to `dtype` exactly, so that a scalar may be cast to a tensor's dtype without
// changing its meaning. Always true for float32/float64 (a double rounds to float32, as PyTorch does with a
// Python float); for int64 and uint8 only an integer in range; for bool only 0 or 1. Casting a scalar that
// does not fit truncates it (0.5 -> 0) or, for an out-of-range value, is undefined behaviour.
bool scalar_fits(double value, DType dtype);
// A 0-dim tensor holding `value` with t's dtype and device: how the comparisons and the integer paths apply
// a scalar (there are no scalar kernels for them). Callers check scalar_fits first. It is shared_scalar's
// read-only constant (ops/elementwise/shared_scalar.h): never write to it.
Tensor scalar_like(const Tensor& t, double value);

}  // namespace minidet::ops::detail
