// index_select: validate, take along dim; backward scatter-adds into zeros (kernels in indexing_kernels.h).
#include "ops/indexing/index_select.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/indexing/indexing_kernels.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;
using ops::detail::AlongDim;

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  ops::detail::check_index_operands("index_select", x, index);
  MINIDET_CHECK(index.dim() <= 1, "index_select: expected a 1-D index, got shape ", index.sizes());
  dim = wrap_dim(dim, x.dim(), "index_select");
  ops::detail::check_index_values("index_select", index, x.size(dim), dim);

  // x as (outer, size, inner); each index value is shared by every o and r (index strides 0, 1, 0).
  AlongDim geometry;
  for (int64_t d = 0; d < dim; ++d) geometry.outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) geometry.inner *= x.size(d);
  geometry.size = x.size(dim);
  geometry.count = index.numel();
  geometry.index_stride_outer = 0;
  geometry.index_stride_count = 1;
  geometry.index_stride_inner = 0;

  Shape out_sizes = x.sizes();
  out_sizes[dim] = geometry.count;
  Tensor out = empty(out_sizes, x.options());
  {
    NoGradGuard raw;
    ops::detail::take_along_dim(out, x.contiguous(), index.contiguous(), geometry);
  }

  autograd::record("index_select", {x}, {out}, {index},
                   [geometry](BackwardContext& ctx, const TensorList& g) -> TensorList {
                     Tensor grad_x = zeros(ctx.input_sizes(0), g[0].options());
                     ops::detail::scatter_add_along_dim(grad_x, g[0].contiguous(), ctx.saved(0).contiguous(),
                                                        geometry);
                     return {grad_x};
                   });
  return out;
}

}  // namespace minidet
