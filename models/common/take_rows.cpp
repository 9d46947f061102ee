#include "models/common/take_rows.h"

#include "core/factories.h"
#include "ops/indexing/indexing_kernels.h"

namespace minidet::models::detail {

Tensor take_rows(const Tensor& x, const Tensor& index) {
  ops::detail::AlongDim geometry;
  geometry.outer = x.size(0);
  geometry.size = x.size(1);
  geometry.count = index.size(1);
  geometry.inner = x.size(2);
  geometry.index_stride_outer = geometry.count;  // one index per (b, t), shared by the C columns
  geometry.index_stride_count = 1;
  geometry.index_stride_inner = 0;
  Tensor out = empty({geometry.outer, geometry.count, geometry.inner}, x.options());
  ops::detail::take_along_dim(out, x.contiguous(), index.contiguous(), geometry);
  return out;
}

}  // namespace minidet::models::detail
