// where and masked_fill: one elementwise select kernel forward, the same kernel with a zero backward.
#include "ops/indexing/where.h"

#include "autograd/function.h"
#include "core/broadcast.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/elementwise/shared_scalar.h"
#include "ops/indexing/indexing_kernels.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;

namespace {

// cond ? a : b over the broadcast shape of all three. Not recorded, no argument checks.
Tensor select_raw(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = empty(shape, a.options());
  NoGradGuard raw;  // the expanded views are internal
  ops::detail::where_kernel(out, cond.expand(shape), a.expand(shape), b.expand(shape));
  return out;
}

void check_mask(const char* op, const Tensor& mask, const char* name, const Tensor& x) {
  ops::check_defined(op, mask, name);
  MINIDET_CHECK(mask.dtype() == kBool, op, ": expected ", name, " of dtype bool, got ", mask.dtype());
  ops::check_same_device(op, mask, name, x, "the values");
}

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  ops::check_defined("where", a, "a");
  ops::check_defined("where", b, "b");
  check_mask("where", cond, "cond", a);
  ops::check_same_device("where", a, "a", b, "b");
  ops::check_same_dtype("where", a, "a", b, "b");
  Tensor out = select_raw(cond, a, b);
  autograd::record("where", {a, b}, {out}, {cond}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    const Tensor cond = ctx.saved(0), zero = shared_scalar(0.0, g[0].options());
    return {ctx.needs_input_grad(0) ? select_raw(cond, g[0], zero) : Tensor(),
            ctx.needs_input_grad(1) ? select_raw(cond, zero, g[0]) : Tensor()};
  });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  ops::check_defined("masked_fill", x, "x");
  check_mask("masked_fill", mask, "mask", x);
  MINIDET_CHECK(broadcastable_to(mask.sizes(), x.sizes()), "masked_fill: mask of shape ", mask.sizes(),
                " does not broadcast to x's shape ", x.sizes());
  Tensor out = select_raw(mask, shared_scalar(value, x.options()), x);
  autograd::record("masked_fill", {x}, {out}, {mask}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {select_raw(ctx.saved(0), shared_scalar(0.0, g[0].options()), g[0])};
  });
  return out;
}

}  // namespace minidet
