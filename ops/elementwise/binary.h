// Binary elementwise arithmetic with NumPy broadcasting, and with a scalar on either side.
//
//   out = a + b    da = dout               db = dout
//   out = a - b    da = dout               db = -dout
//   out = a * b    da = dout * b           db = dout * a
//   out = a / b    da = dout / b           db = -dout * a / b^2
//
// When a or b was broadcast, its gradient above has the output's shape; the autograd engine sums it back
// to the input's shape (sum_to), so these formulas never deal with broadcasting themselves.
// Operands must share dtype and device. add, sub and mul take float32, float64, int64 and uint8 (only floats
// carry gradients); div takes float32 and float64 only (integer division by zero would trap), so convert
// integers with to(kFloat32) first. A scalar applied to an integer tensor must be exactly representable in its
// dtype (add(x, 0.5) on int64 is an error, not a silent no-op).
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

// Elementwise max/min of two tensors, for box arithmetic and masks. A NaN on either side gives NaN. No
// gradient: an error when an input requires grad and grad mode is on (use NoGradGuard or detached tensors).
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
