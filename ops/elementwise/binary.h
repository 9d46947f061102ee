// Binary elementwise arithmetic with NumPy broadcasting, and with a scalar on either side.
//
//   out = a + b    da = dout               db = dout
//   out = a - b    da = dout               db = -dout
//   out = a * b    da = dout * b           db = dout * a
//   out = a / b    da = dout / b           db = -dout * a / b^2
//
// When a or b was broadcast, its gradient above has the output's shape; the autograd engine sums it back
// to the input's shape (sum_to), so these formulas never deal with broadcasting themselves.
// Operands must share dtype and device. float32, float64 and int64 work (only floats carry gradients).
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);  // a - b
Tensor div(double a, const Tensor& b);  // a / b

// Elementwise max/min of two tensors (no gradient; for box arithmetic and masks).
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(double a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x);  // neg

}  // namespace minidet
