// Each op: compute with the raw kernel, then record its backward (formulas in binary.h).
#include "ops/elementwise/binary.h"

#include "autograd/function.h"
#include "ops/common/checks.h"
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

namespace {

// div is floating-only. Integer division by zero traps (SIGFPE) on the CPU and INT64_MIN / -1 is undefined
// behaviour; on the GPU both give garbage. Rather than define our own integer rules, refuse, like true
// division in PyTorch never returning an integer.
void check_div_operand(const Tensor& t, const char* arg) {
  ops::check_defined("div", t, arg);
  MINIDET_CHECK(is_floating(t.dtype()), "div: expected float32 or float64 operands, got ", t.dtype(),
                "; convert with to(kFloat32) first");
}

// The integer path of add/sub/mul with a scalar: a 0-dim tensor of the tensor's dtype. A scalar the dtype
// cannot hold exactly is an error: casting would truncate it (add(x, 0.5) would silently add 0) or, out of
// range (uint8 and -1), be undefined behaviour.
Tensor integer_scalar(const char* op, const Tensor& t, double value) {
  MINIDET_CHECK(ops::detail::scalar_fits(value, t.dtype()), op, ": the scalar ", value,
                " is not exactly representable in the tensor's dtype ", t.dtype(),
                "; convert the tensor with to(kFloat32) first");
  return ops::detail::scalar_like(t, value);
}

}  // namespace

Tensor div(const Tensor& a, const Tensor& b) {
  check_div_operand(a, "a");
  check_div_operand(b, "b");
  Tensor out = binary_raw("div", BinaryOp::Div, a, b);
  autograd::record("div", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    const Tensor a = ctx.saved(0), b = ctx.saved(1);
    return {ctx.needs_input_grad(0) ? div(g[0], b) : Tensor(),
            ctx.needs_input_grad(1) ? neg(div(mul(g[0], a), mul(b, b))) : Tensor()};
  });
  return out;
}

Tensor add(const Tensor& a, double b) {
  ops::check_defined("add", a, "a");
  if (!is_floating(a.dtype())) return add(a, integer_scalar("add", a, b));
  Tensor out = unary_raw("add", UnaryOp::AddScalar, a, b);
  autograd::record("add_scalar", {a}, {out}, {}, [](BackwardContext&, const TensorList& g) -> TensorList {
    return {g[0]};
  });
  return out;
}

Tensor sub(const Tensor& a, double b) {
  ops::check_defined("sub", a, "a");
  // Integers subtract the scalar itself: -b may not fit where b does (uint8 x - 1).
  if (!is_floating(a.dtype())) return sub(a, integer_scalar("sub", a, b));
  return add(a, -b);
}

Tensor mul(const Tensor& a, double b) {
  ops::check_defined("mul", a, "a");
  if (!is_floating(a.dtype())) return mul(a, integer_scalar("mul", a, b));
  Tensor out = unary_raw("mul", UnaryOp::MulScalar, a, b);
  autograd::record("mul_scalar", {a}, {out}, {}, [b](BackwardContext&, const TensorList& g) -> TensorList {
    return {mul(g[0], b)};
  });
  return out;
}

Tensor div(const Tensor& a, double b) {
  check_div_operand(a, "a");
  Tensor out = unary_raw("div", UnaryOp::DivScalar, a, b);
  autograd::record("div_scalar", {a}, {out}, {}, [b](BackwardContext&, const TensorList& g) -> TensorList {
    return {div(g[0], b)};
  });
  return out;
}

Tensor sub(double a, const Tensor& b) {
  ops::check_defined("sub", b, "b");
  if (!is_floating(b.dtype())) return sub(integer_scalar("sub", b, a), b);
  Tensor out = unary_raw("rsub", UnaryOp::RSubScalar, b, a);
  autograd::record("rsub_scalar", {b}, {out}, {}, [](BackwardContext&, const TensorList& g) -> TensorList {
    return {neg(g[0])};
  });
  return out;
}

Tensor div(double a, const Tensor& b) {
  check_div_operand(b, "b");
  Tensor out = unary_raw("rdiv", UnaryOp::RDivScalar, b, a);
  // d(a / b)/db = -a / b^2 = -out / b
  autograd::record("rdiv_scalar", {b}, {out}, {b, out}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {neg(div(mul(g[0], ctx.saved(1)), ctx.saved(0)))};
  });
  return out;
}

// No backward is recorded, so a result computed from a tensor that requires grad would silently cut the graph
// (the gradient would just never arrive). Refuse that instead of returning a detached result.
Tensor maximum(const Tensor& a, const Tensor& b) {
  MINIDET_CHECK(!autograd::any_requires_grad({a, b}),
                "maximum has no gradient; use it under NoGradGuard or on tensors that do not require grad");
  return binary_raw("maximum", BinaryOp::Maximum, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  MINIDET_CHECK(!autograd::any_requires_grad({a, b}),
                "minimum has no gradient; use it under NoGradGuard or on tensors that do not require grad");
  return binary_raw("minimum", BinaryOp::Minimum, a, b);
}

Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace minidet
