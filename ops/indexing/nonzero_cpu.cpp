// CPU nonzero: one counting pass to size the output, one pass to write the indices (both in order).
#include "core/factories.h"
#include "ops/indexing/nonzero_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
Tensor flat_nonzero_kernel(const T* x, int64_t n) {
  int64_t count = 0;
  for (int64_t k = 0; k < n; ++k) count += x[k] != T(0);
  Tensor out = empty({count}, kInt64);
  int64_t* indices = out.data<int64_t>();
  for (int64_t k = 0, written = 0; k < n; ++k)
    if (x[k] != T(0)) indices[written++] = k;
  return out;
}

}  // namespace

Tensor flat_nonzero_cpu(const Tensor& x) {
  return MINIDET_DISPATCH_ALL(x.dtype(), "nonzero",
                              [&] { return flat_nonzero_kernel<scalar_t>(x.data<scalar_t>(), x.numel()); });
}

void unravel_indices_cpu(const Tensor& flat, const Shape& sizes, const Tensor& coords) {
  const int64_t count = flat.numel(), ndim = static_cast<int64_t>(sizes.size());
  const int64_t* in = flat.data<int64_t>();
  int64_t* out = coords.data<int64_t>();
  for (int64_t k = 0; k < count; ++k) {
    int64_t rest = in[k];
    for (int64_t d = ndim - 1; d >= 0; --d) {  // the last dim varies fastest
      out[k * ndim + d] = rest % sizes[d];
      rest /= sizes[d];
    }
  }
}

}  // namespace minidet::ops::detail
