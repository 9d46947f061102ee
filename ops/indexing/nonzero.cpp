// nonzero / flat_nonzero: device switch; the coordinates are unravelled from the flat indices.
#include "ops/indexing/nonzero.h"

#include "core/factories.h"
#include "ops/common/device_switch.h"
#include "ops/indexing/nonzero_kernels.h"

namespace minidet {

Tensor flat_nonzero(const Tensor& x) {
  MINIDET_CHECK(x.defined(), "flat_nonzero: x is an undefined tensor");
  NoGradGuard raw;
  if (x.numel() == 0) return empty({0}, TensorOptions(kInt64, x.device()));
  const Tensor input = x.contiguous();
  return MINIDET_DEVICE_SWITCH(input, ops::detail::flat_nonzero_cpu(input), ops::detail::flat_nonzero_cuda(input));
}

Tensor nonzero(const Tensor& x) {
  MINIDET_CHECK(x.defined(), "nonzero: x is an undefined tensor");
  const Tensor flat = flat_nonzero(x);
  const int64_t count = flat.size(0), ndim = x.dim();
  if (ndim == 1) return flat.view({count, 1});
  Tensor coords = empty({count, ndim}, TensorOptions(kInt64, x.device()));
  if (coords.numel() == 0) return coords;
  MINIDET_DEVICE_SWITCH(x, ops::detail::unravel_indices_cpu(flat, x.sizes(), coords),
                        ops::detail::unravel_indices_cuda(flat, x.sizes(), coords));
  return coords;
}

}  // namespace minidet
