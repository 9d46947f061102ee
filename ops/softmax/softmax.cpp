// softmax / log_softmax: validation, the autograd record (it saves the output y only) and dispatch.
#include "ops/softmax/softmax.h"

#include <algorithm>

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/softmax/softmax_kernels.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;

// ---- device switches -----------------------------------------------------------------------------------

namespace ops::detail {

void softmax_forward_kernel(const Tensor& x, const RowLayout& layout, const Tensor& y, bool log) {
  if (y.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(y, softmax_forward_cpu(x, layout, y, log), softmax_forward_cuda(x, layout, y, log));
}

void softmax_backward_kernel(const Tensor& y, const Tensor& dy, const RowLayout& layout, const Tensor& dx, bool log) {
  if (dx.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(dx, softmax_backward_cpu(y, dy, layout, dx, log),
                        softmax_backward_cuda(y, dy, layout, dx, log));
}

}  // namespace ops::detail

namespace {

Tensor softmax_impl(const char* op, const Tensor& x, int64_t dim, bool log) {
  ops::check_defined(op, x, "input");
  ops::check_floating(op, x, "input");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);  // a 0-dim x accepts dim 0 or -1
  const ops::RowLayout layout = ops::row_layout(x.sizes(), d);
  Tensor y = empty(x.sizes(), x.options());
  {
    NoGradGuard raw;  // contiguous() is a raw method
    ops::detail::softmax_forward_kernel(x.contiguous(), layout, y, log);
  }
  autograd::record(op, {x}, {y}, {y}, [layout, log](BackwardContext& ctx, const TensorList& g) -> TensorList {
    const Tensor y = ctx.saved(0);
    Tensor dx = empty(y.sizes(), y.options());
    ops::detail::softmax_backward_kernel(y, g[0].contiguous(), layout, dx, log);
    return {dx};
  });
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl("softmax", x, dim, /*log=*/false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl("log_softmax", x, dim, /*log=*/true); }

}  // namespace minidet
