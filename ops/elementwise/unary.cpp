// Each op: compute with the raw kernel, then record its backward (formulas in unary.h).
#include "ops/elementwise/unary.h"

#include <cmath>

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/common/checks.h"
#include "ops/elementwise/elementwise_raw.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;
using ops::UnaryOp;
using ops::detail::unary_raw;

Tensor neg(const Tensor& x) {
  Tensor y = unary_raw("neg", UnaryOp::Neg, x);
  autograd::record("neg", {x}, {y}, {}, [](BackwardContext&, const TensorList& g) -> TensorList {
    return {neg(g[0])};
  });
  return y;
}

Tensor exp(const Tensor& x) {
  Tensor y = unary_raw("exp", UnaryOp::Exp, x);
  autograd::record("exp", {x}, {y}, {y}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {mul(g[0], ctx.saved(0))};
  });
  return y;
}

Tensor log(const Tensor& x) {
  Tensor y = unary_raw("log", UnaryOp::Log, x);
  autograd::record("log", {x}, {y}, {x}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {div(g[0], ctx.saved(0))};
  });
  return y;
}

Tensor sqrt(const Tensor& x) {
  Tensor y = unary_raw("sqrt", UnaryOp::Sqrt, x);
  autograd::record("sqrt", {x}, {y}, {y}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {div(g[0], mul(ctx.saved(0), 2.0))};
  });
  return y;
}

Tensor abs(const Tensor& x) {
  Tensor y = unary_raw("abs", UnaryOp::Abs, x);
  autograd::record("abs", {x}, {y}, {x}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {mul(g[0], sign(ctx.saved(0)))};
  });
  return y;
}

Tensor sign(const Tensor& x) { return unary_raw("sign", UnaryOp::Sign, x); }

Tensor floor(const Tensor& x) {
  Tensor y = unary_raw("floor", UnaryOp::Floor, x);
  // The derivative is 0 between integers (undefined on them). Recorded as torch.floor is: floor(x) stays in the
  // graph and hands back exact zeros, so a wrap like x - pi * floor((x + pi/2) / pi) (models/box_coder's
  // normalize_angle) has x's own gradient, 1.
  autograd::record("floor", {x}, {y}, {}, [](BackwardContext&, const TensorList& g) -> TensorList {
    return {zeros_like(g[0])};
  });
  return y;
}

Tensor relu(const Tensor& x) {
  Tensor y = unary_raw("relu", UnaryOp::Relu, x);
  // y > 0 exactly where x > 0, so the output is enough to rebuild the mask.
  autograd::record("relu", {x}, {y}, {y}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {mul(g[0], unary_raw("relu", UnaryOp::Positive, ctx.saved(0)))};
  });
  return y;
}

Tensor sigmoid(const Tensor& x) {
  Tensor y = unary_raw("sigmoid", UnaryOp::Sigmoid, x);
  autograd::record("sigmoid", {x}, {y}, {y}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    const Tensor y = ctx.saved(0);
    return {mul(g[0], mul(y, sub(1.0, y)))};
  });
  return y;
}

Tensor tanh(const Tensor& x) {
  Tensor y = unary_raw("tanh", UnaryOp::Tanh, x);
  autograd::record("tanh", {x}, {y}, {y}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    const Tensor y = ctx.saved(0);
    return {mul(g[0], sub(1.0, mul(y, y)))};
  });
  return y;
}

Tensor sin(const Tensor& x) {
  Tensor y = unary_raw("sin", UnaryOp::Sin, x);
  autograd::record("sin", {x}, {y}, {x}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {mul(g[0], cos(ctx.saved(0)))};
  });
  return y;
}

Tensor cos(const Tensor& x) {
  Tensor y = unary_raw("cos", UnaryOp::Cos, x);
  autograd::record("cos", {x}, {y}, {x}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {neg(mul(g[0], sin(ctx.saved(0))))};
  });
  return y;
}

Tensor pow(const Tensor& x, double exponent) {
  Tensor y = unary_raw("pow", UnaryOp::PowScalar, x, exponent);
  autograd::record("pow", {x}, {y}, {x}, [exponent](BackwardContext& ctx, const TensorList& g) -> TensorList {
    if (exponent == 0.0) return {mul(g[0], 0.0)};
    return {mul(g[0], mul(pow(ctx.saved(0), exponent - 1.0), exponent))};
  });
  return y;
}

Tensor square(const Tensor& x) {
  ops::check_defined("square", x, "input");  // so the error names what the caller called, not pow
  return pow(x, 2.0);
}

Tensor clamp(const Tensor& x, double min, double max) {
  // A NaN bound passes `min > max` (every comparison with NaN is false), yet the forward would clamp one side
  // while the gradient mask lo <= x <= hi is 0 everywhere. Infinite bounds are fine (clamp_min/clamp_max).
  MINIDET_CHECK(!std::isnan(min) && !std::isnan(max), "clamp: bounds must not be NaN, got min ", min, " and max ",
                max);
  MINIDET_CHECK(!(min > max), "clamp: min ", min, " is greater than max ", max);
  Tensor y = unary_raw("clamp", UnaryOp::Clamp, x, min, max);
  autograd::record("clamp", {x}, {y}, {x}, [min, max](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {mul(g[0], unary_raw("clamp", UnaryOp::InRange, ctx.saved(0), min, max))};
  });
  return y;
}

Tensor clamp_min(const Tensor& x, double min) { return clamp(x, min, std::numeric_limits<double>::infinity()); }
Tensor clamp_max(const Tensor& x, double max) { return clamp(x, -std::numeric_limits<double>::infinity(), max); }

}  // namespace minidet
