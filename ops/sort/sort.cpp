// sort and argsort: validation, the autograd record (formula in sort.h) and the device switch.
#include "ops/sort/sort.h"

#include <algorithm>

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/reduction/reduction_kernels.h"  // scatter_rows_kernel: the backward
#include "ops/sort/sort_kernels.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;
using ops::RowLayout;

namespace ops::detail {

void sort_rows(const Tensor& x, const RowLayout& layout, bool descending, const Tensor& values,
               const Tensor& indices) {
  if (x.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(x, sort_rows_cpu(x, layout, descending, values, indices),
                        sort_rows_cuda(x, layout, descending, values, indices));
}

}  // namespace ops::detail

namespace {

struct SortPlan {
  RowLayout layout;
  ValuesIndices out;
};

// Validates, then sorts x's rows (no recording). A 0-dim x is one row of one element.
SortPlan sort_raw(const char* op, const Tensor& x, int64_t dim, bool descending) {
  ops::check_defined(op, x, "input");
  MINIDET_CHECK(x.dtype() != kBool, op, ": expected a numeric tensor, got dtype bool");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  SortPlan plan;
  plan.layout = ops::row_layout(x.sizes(), d);
  plan.out = {empty(x.sizes(), x.options()), empty(x.sizes(), TensorOptions(kInt64, x.device()))};
  NoGradGuard raw;
  ops::detail::sort_rows(x.contiguous(), plan.layout, descending, plan.out.values, plan.out.indices);
  return plan;
}

}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending, bool /*stable: always stable*/) {
  SortPlan plan = sort_raw("sort", x, dim, descending);
  const RowLayout layout = plan.layout;
  // v[k] = x[i[k]] is a permutation: its backward moves each dv[k] back to place i[k] (a scatter with k = n).
  autograd::record("sort", {x}, {plan.out.values}, {plan.out.indices},
                   [layout](BackwardContext& ctx, const TensorList& g) -> TensorList {
                     Tensor grad_x = zeros(ctx.input_sizes(0), g[0].options());
                     ops::detail::scatter_rows_kernel(grad_x, layout, g[0].contiguous(), ctx.saved(0), layout.size);
                     return {grad_x};
                   });
  return plan.out;
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool /*stable: always stable*/) {
  return sort_raw("argsort", x, dim, descending).out.indices;
}

}  // namespace minidet
