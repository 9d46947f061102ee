// Unary elementwise ops, y = f(x), and their gradients dx = dy * f'(x):
//
//   neg      y = -x              dx = -dy
//   exp      y = e^x             dx = dy * y
//   log      y = ln x            dx = dy / x
//   sqrt     y = sqrt(x)         dx = dy / (2 y)
//   abs      y = |x|             dx = dy * sign(x)          (0 at x = 0, as in PyTorch)
//   relu     y = max(x, 0)       dx = dy * [x > 0]          (relu(NaN) = NaN, as in PyTorch)
//   sigmoid  y = 1 / (1 + e^-x)  dx = dy * y * (1 - y)
//   tanh     y = tanh x          dx = dy * (1 - y^2)
//   sin      y = sin x           dx = dy * cos x
//   cos      y = cos x           dx = -dy * sin x
//   pow      y = x^p             dx = dy * p * x^(p-1)
//   clamp    y = min(max(x, lo), hi)   dx = dy * [lo <= x <= hi]   (lo, hi not NaN; infinite is fine)
//   sign     y = sign(x)         no gradient (piecewise constant)
//   floor    y = floor(x)        dx = 0                     (piecewise constant, 0 between integers; recorded
//                                                          as torch.floor is: floor(x) requires grad)
//
// Ops that can write their gradient from y save y instead of x. All take float32 or float64 on any device.
#pragma once

#include <limits>

#include "core/tensor.h"

namespace minidet {

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor square(const Tensor& x);
Tensor clamp(const Tensor& x, double min, double max);
Tensor clamp_min(const Tensor& x, double min);
Tensor clamp_max(const Tensor& x, double max);

}  // namespace minidet
