// linear: one gemm forward (bias preloaded into the output), up to two gemms and a row sum backward.
#include "ops/matmul/linear.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "core/reduce_sum.h"
#include "ops/common/checks.h"
#include "ops/matmul/gemm.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  ops::check_defined("linear", x, "x");
  ops::check_defined("linear", weight, "weight");
  ops::check_same_device("linear", x, "x", weight, "weight");
  ops::check_same_dtype("linear", x, "x", weight, "weight");
  ops::check_floating("linear", x, "x");
  MINIDET_CHECK(weight.dim() == 2, "linear: expected weight of shape (out_features, in_features), got ",
                weight.sizes());
  MINIDET_CHECK(x.dim() >= 1, "linear: expected x of shape (..., in_features), got a 0-dim tensor");
  const int64_t in_features = weight.size(1), out_features = weight.size(0);
  MINIDET_CHECK(x.size(-1) == in_features, "linear: x has ", x.size(-1), " features (shape ", x.sizes(),
                ") but weight expects ", in_features, " (weight shape ", weight.sizes(), ")");
  if (bias.defined()) {
    ops::check_same_device("linear", x, "x", bias, "bias");
    ops::check_same_dtype("linear", x, "x", bias, "bias");
    MINIDET_CHECK(bias.dim() == 1 && bias.size(0) == out_features, "linear: expected bias of shape (",
                  out_features, ",), got ", bias.sizes());
  }
  // Every leading position of x is one row of the product (computed from sizes so that in = 0 works).
  const int64_t rows = shape_numel(Shape(x.sizes().begin(), x.sizes().end() - 1));
  Shape out_sizes = x.sizes();
  out_sizes.back() = out_features;

  Tensor y;
  {
    NoGradGuard raw;
    Tensor y_rows = empty({rows, out_features}, x.options());
    if (bias.defined()) y_rows.copy_(bias);  // broadcast over rows: gemm then adds x W^T on top
    else y_rows.zero_();
    if (in_features > 0) ops::gemm(x.reshape({rows, in_features}), weight.t(), y_rows, 1.0, 1.0);
    y = y_rows.view(out_sizes);
  }

  const bool x_needs = autograd::any_requires_grad({x}), weight_needs = autograd::any_requires_grad({weight});
  autograd::record(
      "linear", {x, weight, bias}, {y}, {x_needs ? weight : Tensor(), weight_needs ? x : Tensor()},
      [rows, in_features, out_features](BackwardContext& ctx, const TensorList& g) -> TensorList {
        const Tensor grad_rows = g[0].reshape({rows, out_features});
        // A product whose inner dim is 0 is all zeros; allocate it zeroed rather than rely on BLAS's k = 0.
        auto product = [](const Tensor& a, const Tensor& b) {
          if (a.size(1) == 0) return zeros({a.size(0), b.size(1)}, a.options());
          Tensor c = empty({a.size(0), b.size(1)}, a.options());
          ops::gemm(a, b, c);
          return c;
        };
        Tensor grad_x, grad_weight, grad_bias;
        if (ctx.needs_input_grad(0))
          grad_x = product(grad_rows, ctx.saved(0)).view(ctx.input_sizes(0));  // G W
        if (ctx.needs_input_grad(1))
          grad_weight = product(grad_rows.t(), ctx.saved(1).reshape({rows, in_features}));  // G^T X
        if (ctx.needs_input_grad(2)) grad_bias = sum_dims_raw(grad_rows, {0}, /*keepdim=*/false);
        return {grad_x, grad_weight, grad_bias};
      });
  return y;
}

}  // namespace minidet
