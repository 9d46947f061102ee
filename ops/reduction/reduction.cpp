// Reductions: validation, the autograd records (formulas in reduction.h) and dispatch to the raw kernels.
//
// Forward work runs under NoGradGuard because it uses raw Tensor methods (contiguous, view, transpose) that
// refuse tensors requiring grad while recording; record() then runs with grad mode back on.
#include "ops/reduction/reduction.h"

#include <algorithm>

#include "autograd/function.h"
#include "core/factories.h"
#include "core/reduce_sum.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/elementwise_raw.h"
#include "ops/indexing/where.h"
#include "ops/reduction/reduction_kernels.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;
using ops::RowLayout;
using ops::detail::Extremum;

// ---- device switches -----------------------------------------------------------------------------------

namespace ops::detail {

void extremum_rows_kernel(Extremum kind, const Tensor& x, const RowLayout& layout, const Tensor& values,
                          const Tensor& indices) {
  if (layout.rows() == 0) return;
  MINIDET_DEVICE_SWITCH(x, extremum_rows_cpu(kind, x, layout, values, indices),
                        extremum_rows_cuda(kind, x, layout, values, indices));
}

void scatter_rows_kernel(const Tensor& grad_x, const RowLayout& layout, const Tensor& grad, const Tensor& indices,
                         int64_t k) {
  if (grad.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(grad_x, scatter_rows_cpu(grad_x, layout, grad, indices, k),
                        scatter_rows_cuda(grad_x, layout, grad, indices, k));
}

void topk_last_dim_kernel(const Tensor& x, int64_t k, bool largest, const Tensor& values, const Tensor& indices) {
  if (values.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(x, topk_last_dim_cpu(x, k, largest, values, indices),
                        topk_last_dim_cuda(x, k, largest, values, indices));
}

}  // namespace ops::detail

namespace {

// x's shape with every reduced dim set to 1: the keepdim shape, which the gradient is viewed as before it is
// broadcast back over the reduced dims. sum_dims_raw has already validated `dims`.
Shape keepdim_shape(const Tensor& x, const std::vector<int64_t>& dims) {
  Shape shape = x.sizes();
  if (dims.empty()) std::fill(shape.begin(), shape.end(), 1);
  for (int64_t d : dims)
    if (x.dim() > 0) shape[wrap_dim(d, x.dim(), "sum")] = 1;
  return shape;
}

// Number of input elements that fold into each output element.
int64_t reduced_count(const Tensor& x, const Shape& kept) {
  int64_t n = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (kept[d] == 1) n *= x.size(d);
  return n;
}

// dy of the reduced shape, repeated over the reduced dims: the gradient of a sum. An expanded view (stride 0
// over the reduced dims), not a copy: the engine accepts views (it clones before accumulating in place, and
// AccumulateGrad clones into .grad), and every backward formula that may receive it reads strided gradients
// (the elementwise, where, shape and pointwise-loss kernels index by strides; gemm, conv, pooling, softmax,
// batch norm, cross entropy, indexing and the reductions call contiguous() first).
Tensor broadcast_back(const Tensor& grad, const Shape& kept, const Shape& input_sizes) {
  return grad.reshape(kept).expand(input_sizes);
}

void check_not_bool(const char* op, const Tensor& x) {
  ops::check_defined(op, x, "input");
  MINIDET_CHECK(x.dtype() != kBool, op, ": expected a numeric tensor, got dtype bool");
}

// A 0-dim tensor reduces like a 1-element 1-D one: dim 0 or -1, and the result stays 0-dim.
int64_t wrap_reduce_dim(const char* op, const Tensor& x, int64_t dim) {
  return wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
}

Shape reduced_shape(const Tensor& x, int64_t dim, bool keepdim, int64_t new_size) {
  Shape shape = x.sizes();
  if (x.dim() == 0) return shape;
  if (keepdim || new_size != 1)
    shape[dim] = new_size;
  else
    shape.erase(shape.begin() + dim);
  return shape;
}

// max/min/argmax/argmin along one dim: values and first indices.
ValuesIndices extremum_along(const char* op, Extremum kind, const Tensor& x, int64_t dim, bool keepdim) {
  check_not_bool(op, x);
  const int64_t d = wrap_reduce_dim(op, x, dim);
  MINIDET_CHECK(x.dim() == 0 || x.size(d) > 0, op, ": cannot reduce dim ", dim, " of shape ", x.sizes(),
                ": it is empty, so there is no element to pick");
  const Shape out_shape = reduced_shape(x, d, keepdim, 1);
  ValuesIndices out{empty(out_shape, x.options()), empty(out_shape, TensorOptions(kInt64, x.device()))};
  NoGradGuard raw;
  ops::detail::extremum_rows_kernel(kind, x.contiguous(), ops::row_layout(x.sizes(), d), out.values, out.indices);
  return out;
}

ValuesIndices extremum_with_grad(const char* op, Extremum kind, const Tensor& x, int64_t dim, bool keepdim) {
  ValuesIndices out = extremum_along(op, kind, x, dim, keepdim);
  const RowLayout layout = ops::row_layout(x.sizes(), wrap_reduce_dim(op, x, dim));
  // The whole gradient of each row goes to the one element picked: a scatter with k = 1.
  autograd::record(op, {x}, {out.values}, {out.indices},
                   [layout](BackwardContext& ctx, const TensorList& g) -> TensorList {
                     Tensor grad_x = zeros(ctx.input_sizes(0), g[0].options());
                     ops::detail::scatter_rows_kernel(grad_x, layout, g[0].contiguous(), ctx.saved(0), 1);
                     return {grad_x};
                   });
  return out;
}

// max(x)/min(x) over every element; the gradient is shared evenly by all elements equal to the result.
Tensor extremum_all(const char* op, Extremum kind, const Tensor& x) {
  check_not_bool(op, x);
  MINIDET_CHECK(x.numel() > 0, op, ": the input of shape ", x.sizes(),
                " is empty; there is no element to pick (pass a dim to reduce a non-empty one)");
  Tensor value = empty({}, x.options());
  {
    NoGradGuard raw;
    Tensor index = empty({}, TensorOptions(kInt64, x.device()));
    ops::detail::extremum_rows_kernel(kind, x.contiguous(), RowLayout{1, x.numel(), 1}, value, index);
  }
  autograd::record(op, {x}, {value}, {x, value}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    const Tensor x = ctx.saved(0), v = ctx.saved(1);
    // The elements that gave v: those equal to it, or, when v is NaN (NaN propagates), the NaNs. eq(x, NaN)
    // is all false, so without the second case count = 0 and every gradient would be 0 * (g / 0) = NaN.
    // PyTorch's mask, (x == v) | (isnan(x) & isnan(v)), chosen on the device by where (ne(t, t) is the NaN
    // test; v is 0-dim, so its NaN test selects one whole mask), with no sync to read v.
    const Tensor picked = where(ne(v, v), ne(x, x), eq(x, v)).to(x.dtype());  // 1 where picked, else 0
    const Tensor count = sum_dims_raw(picked, {}, false);                      // on the device too
    return {mul(picked, div(g[0], count))};
  });
  return value;
}

}  // namespace

// ---- sum and mean -----------------------------------------------------------------------------------------

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  ops::check_defined("sum", x, "input");
  // Integer and bool tensors sum to int64 (see sum_dims_raw) and carry no gradient: nothing to record.
  if (!is_floating(x.dtype())) return sum_dims_raw(x, dims, keepdim);
  Tensor y = sum_dims_raw(x, dims, keepdim);
  const Shape kept = keepdim_shape(x, dims);
  autograd::record("sum", {x}, {y}, {}, [kept](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {broadcast_back(g[0], kept, ctx.input_sizes(0))};
  });
  return y;
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  ops::check_defined("mean", x, "input");
  ops::check_floating("mean", x, "input");
  const Tensor total = sum_dims_raw(x, dims, keepdim);
  const Shape kept = keepdim_shape(x, dims);
  const double n = static_cast<double>(reduced_count(x, kept));
  // Dividing by n = 0 (a mean of nothing) gives 0 / 0 = NaN, as in PyTorch.
  Tensor y = ops::detail::unary_raw("mean", ops::UnaryOp::DivScalar, total, n);
  autograd::record("mean", {x}, {y}, {}, [kept, n](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {div(g[0].reshape(kept).expand(ctx.input_sizes(0)), n)};
  });
  return y;
}

// ---- max, min, argmax, argmin -----------------------------------------------------------------------------

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_with_grad("max", Extremum::Max, x, dim, keepdim);
}
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_with_grad("min", Extremum::Min, x, dim, keepdim);
}
Tensor max(const Tensor& x) { return extremum_all("max", Extremum::Max, x); }
Tensor min(const Tensor& x) { return extremum_all("min", Extremum::Min, x); }

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_along("argmax", Extremum::Max, x, dim, keepdim).indices;
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_along("argmin", Extremum::Min, x, dim, keepdim).indices;
}

// ---- topk ---------------------------------------------------------------------------------------------------

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted: always sorted*/) {
  check_not_bool("topk", x);
  const int64_t d = wrap_reduce_dim("topk", x, dim);
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  MINIDET_CHECK(k >= 0 && k <= n, "topk: k = ", k, " is out of range for dim ", dim, " of size ", n, " (shape ",
                x.sizes(), ")");
  const Shape out_shape = reduced_shape(x, d, /*keepdim=*/true, k);
  ValuesIndices out{empty(out_shape, x.options()), empty(out_shape, TensorOptions(kInt64, x.device()))};
  if (out.values.numel() > 0) {
    NoGradGuard raw;
    // The kernels work on the last dim: move dim there, pick, and move it back.
    const Tensor last = (x.dim() == 0 ? x.reshape({1}) : x.transpose(d, -1)).contiguous();
    const int64_t rows = last.numel() / n;
    if (x.dim() == 0 || d == x.dim() - 1) {  // already the last dim: the kernel writes the outputs themselves
      ops::detail::topk_last_dim_kernel(last.view({rows, n}), k, largest, out.values.view({rows, k}),
                                        out.indices.view({rows, k}));
    } else {
      Tensor values = empty({rows, k}, x.options()), indices = empty({rows, k}, TensorOptions(kInt64, x.device()));
      ops::detail::topk_last_dim_kernel(last.view({rows, n}), k, largest, values, indices);
      Shape last_shape = last.sizes();
      last_shape.back() = k;
      out.values.copy_(values.view(last_shape).transpose(d, -1).reshape(out_shape));
      out.indices.copy_(indices.view(last_shape).transpose(d, -1).reshape(out_shape));
    }
  }
  const RowLayout layout = ops::row_layout(x.sizes(), d);
  autograd::record("topk", {x}, {out.values}, {out.indices},
                   [layout, k](BackwardContext& ctx, const TensorList& g) -> TensorList {
                     Tensor grad_x = zeros(ctx.input_sizes(0), g[0].options());
                     ops::detail::scatter_rows_kernel(grad_x, layout, g[0].contiguous(), ctx.saved(0), k);
                     return {grad_x};
                   });
  return out;
}

}  // namespace minidet
