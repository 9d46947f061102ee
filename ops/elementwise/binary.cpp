// Each op: compute with the raw kernel, then record its backward (formulas in binary.h).
#include "ops/elementwise/binary.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/elementwise/elementwise_raw.h"
#include "ops/elementwise/unary.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;
using ops::BinaryOp;
using ops::UnaryOp;
using ops::detail::binary_raw;
using ops::detail::unary_raw;

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw("add", BinaryOp::Add, a, b);
  autograd::record("add", {a, b}, {out}, {}, [](BackwardContext&, const TensorList& g) -> TensorList {
    return {g[0], g[0]};
  });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw("sub", BinaryOp::Sub, a, b);
  autograd::record("sub", {a, b}, {out}, {}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {g[0], ctx.needs_input_grad(1) ? neg(g[0]) : Tensor()};
  });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw("mul", BinaryOp::Mul, a, b);
  autograd::record("mul", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {ctx.needs_input_grad(0) ? mul(g[0], ctx.saved(1)) : Tensor(),
            ctx.needs_input_grad(1) ? mul(g[0], ctx.saved(0)) : Tensor()};
  });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw("div", BinaryOp::Div, a, b);
  autograd::record("div", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    const Tensor a = ctx.saved(0), b = ctx.saved(1);
    return {ctx.needs_input_grad(0) ? div(g[0], b) : Tensor(),
            ctx.needs_input_grad(1) ? neg(div(mul(g[0], a), mul(b, b))) : Tensor()};
  });
  return out;
}

namespace {
// Integer tensors have no unary scalar kernels (those are float-only); use a broadcast 0-dim tensor.
Tensor scalar_like(const Tensor& t, double value) { return full({}, value, t.options()); }
}  // namespace

Tensor add(const Tensor& a, double b) {
  if (!is_floating(a.dtype())) return add(a, scalar_like(a, b));
  Tensor out = unary_raw("add", UnaryOp::AddScalar, a, b);
  autograd::record("add_scalar", {a}, {out}, {}, [](BackwardContext&, const TensorList& g) -> TensorList {
    return {g[0]};
  });
  return out;
}

Tensor sub(const Tensor& a, double b) { return add(a, -b); }

Tensor mul(const Tensor& a, double b) {
  if (!is_floating(a.dtype())) return mul(a, scalar_like(a, b));
  Tensor out = unary_raw("mul", UnaryOp::MulScalar, a, b);
  autograd::record("mul_scalar", {a}, {out}, {}, [b](BackwardContext&, const TensorList& g) -> TensorList {
    return {mul(g[0], b)};
  });
  return out;
}

Tensor div(const Tensor& a, double b) {
  if (!is_floating(a.dtype())) return div(a, scalar_like(a, b));
  Tensor out = unary_raw("div", UnaryOp::DivScalar, a, b);
  autograd::record("div_scalar", {a}, {out}, {}, [b](BackwardContext&, const TensorList& g) -> TensorList {
    return {div(g[0], b)};
  });
  return out;
}

Tensor sub(double a, const Tensor& b) {
  if (!is_floating(b.dtype())) return sub(scalar_like(b, a), b);
  Tensor out = unary_raw("rsub", UnaryOp::RSubScalar, b, a);
  autograd::record("rsub_scalar", {b}, {out}, {}, [](BackwardContext&, const TensorList& g) -> TensorList {
    return {neg(g[0])};
  });
  return out;
}

Tensor div(double a, const Tensor& b) {
  if (!is_floating(b.dtype())) return div(scalar_like(b, a), b);
  Tensor out = unary_raw("rdiv", UnaryOp::RDivScalar, b, a);
  // d(a / b)/db = -a / b^2 = -out / b
  autograd::record("rdiv_scalar", {b}, {out}, {b, out}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {neg(div(mul(g[0], ctx.saved(1)), ctx.saved(0)))};
  });
  return out;
}

Tensor maximum(const Tensor& a, const Tensor& b) { return binary_raw("maximum", BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_raw("minimum", BinaryOp::Minimum, a, b); }

Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace minidet
