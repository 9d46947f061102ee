// gather: validate, take along dim; backward scatter-adds into zeros (kernels in indexing_kernels.h).
#include "ops/indexing/gather.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/indexing/indexing_kernels.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;
using ops::detail::AlongDim;

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  ops::detail::check_index_operands("gather", x, index);
  MINIDET_CHECK(index.dim() == x.dim(), "gather: expected index with as many dims as x (", x.dim(),
                "), got index shape ", index.sizes(), " for x shape ", x.sizes());
  dim = wrap_dim(dim, x.dim(), "gather");
  for (int64_t d = 0; d < x.dim(); ++d)
    MINIDET_CHECK(d == dim || index.size(d) <= x.size(d), "gather: index shape ", index.sizes(),
                  " is larger than x shape ", x.sizes(), " in dim ", d, " (only dim ", dim, " may differ freely)");
  ops::detail::check_index_values("gather", index, x.size(dim), dim);

  // Only the part of x that index covers in the other dims is ever read. Seen contiguously, that part is
  // (outer, size, inner) and index is (outer, count, inner): one index value per output element.
  Shape part_sizes = index.sizes();
  part_sizes[dim] = x.size(dim);
  AlongDim geometry;
  for (int64_t d = 0; d < dim; ++d) geometry.outer *= index.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) geometry.inner *= index.size(d);
  geometry.size = x.size(dim);
  geometry.count = index.size(dim);
  geometry.index_stride_outer = geometry.count * geometry.inner;
  geometry.index_stride_count = geometry.inner;
  geometry.index_stride_inner = 1;

  // The leading corner of `t` with sizes `part_sizes` (a view; t itself when they already match).
  auto corner = [dim, part_sizes](Tensor t) {
    for (int64_t d = 0; d < t.dim(); ++d)
      if (d != dim && part_sizes[d] < t.size(d)) t = t.narrow(d, 0, part_sizes[d]);
    return t;
  };

  Tensor out = empty(index.sizes(), x.options());
  {
    NoGradGuard raw;
    ops::detail::take_along_dim(out, corner(x).contiguous(), index.contiguous(), geometry);
  }

  autograd::record(
      "gather", {x}, {out}, {index},
      [geometry, part_sizes, corner](BackwardContext& ctx, const TensorList& g) -> TensorList {
        const Shape& x_sizes = ctx.input_sizes(0);
        Tensor grad_part = zeros(part_sizes, g[0].options());
        ops::detail::scatter_add_along_dim(grad_part, g[0].contiguous(), ctx.saved(0).contiguous(), geometry);
        if (part_sizes == x_sizes) return {grad_part};
        Tensor grad_x = zeros(x_sizes, g[0].options());  // x outside the corner was never read: gradient 0
        corner(grad_x).copy_(grad_part);
        return {grad_x};
      });
  return out;
}

}  // namespace minidet
