#include "ops/take_rows/take_rows.h"

#include "core/error.h"
#include "core/factories.h"
#include "core/grad_mode.h"
#include "ops/common/device_switch.h"
#include "ops/take_rows/take_rows_kernels.h"

namespace minidet {

Tensor take_rows(const Tensor& x, const Tensor& index) {
  MINIDET_CHECK(x.defined() && index.defined(), "take_rows: undefined input");
  MINIDET_CHECK(x.dim() == 3, "take_rows: expected x of shape (B, K, C), got ", x.sizes());
  MINIDET_CHECK(is_floating(x.dtype()), "take_rows: expected a floating x, got ", x.dtype());
  MINIDET_CHECK(index.dim() == 2 && index.size(0) == x.size(0), "take_rows: expected index of shape (B, T) with B = ",
                x.size(0), ", got ", index.sizes());
  MINIDET_CHECK(index.dtype() == kInt64, "take_rows: expected an int64 index, got ", index.dtype());
  MINIDET_CHECK(index.device() == x.device(), "take_rows: x is on ", x.device(), " but index is on ", index.device());
  MINIDET_CHECK(!(GradMode::is_enabled() && x.requires_grad()),
                "take_rows: x requires grad, but take_rows is not recorded by autograd (use gather)");
  Tensor out = empty({x.size(0), index.size(1), x.size(2)}, x.options());
  if (out.numel() == 0) return out;
  MINIDET_CHECK(x.size(1) > 0, "take_rows: x has no rows (K = 0) to take ", index.size(1), " from");
  const Tensor dense_x = x.contiguous(), dense_index = index.contiguous();
  MINIDET_DEVICE_SWITCH(x, ops::detail::take_rows_cpu(out, dense_x, dense_index),
                        ops::detail::take_rows_cuda(out, dense_x, dense_index));
  return out;
}

namespace ops::detail {

void take_rows_cpu(const Tensor& out, const Tensor& x, const Tensor& index) {
  const int64_t batch = x.size(0), rows = x.size(1), columns = x.size(2), count = index.size(1);
  const int64_t* picked = index.data<int64_t>();
  for (int64_t i = 0; i < batch * count; ++i)
    MINIDET_CHECK(picked[i] >= 0 && picked[i] < rows, "take_rows: index ", picked[i], " at (", i / count, ", ",
                  i % count, ") is outside [0, ", rows, ")");
  MINIDET_DISPATCH_FLOATING(x.dtype(), "take_rows", [&] {
    const scalar_t* from = x.data<scalar_t>();
    scalar_t* to = out.data<scalar_t>();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < count; ++t) {
        const scalar_t* row = from + (b * rows + picked[b * count + t]) * columns;
        scalar_t* dst = to + (b * count + t) * columns;
        for (int64_t c = 0; c < columns; ++c) dst[c] = row[c];
      }
  });
}

}  // namespace ops::detail

}  // namespace minidet
