// Validation and output sizes shared by the sliding-window pooling ops (rules in pool2d.h).
#include "ops/common/checks.h"
#include "ops/pooling/pool2d_kernels.h"

namespace minidet::ops::detail {
namespace {

int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel;  // >= 0, checked by the caller
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // ceil_mode may add a window that starts in the right padding only; PyTorch drops it.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace

PoolGeometry make_pool_geometry(const char* op, const Tensor& input, const Pool2dOptions& o) {
  check_defined(op, input, "input");
  check_dim(op, input, "input (N, C, H, W)", 4);
  check_floating(op, input, "input");
  PoolGeometry g;
  g.kernel_h = o.kernel_h;
  g.kernel_w = o.kernel_w;
  g.stride_h = o.stride_h == 0 ? o.kernel_h : o.stride_h;
  g.stride_w = o.stride_w == 0 ? o.kernel_w : o.stride_w;
  g.pad_h = o.pad_h;
  g.pad_w = o.pad_w;
  g.count_include_pad = o.count_include_pad;
  MINIDET_CHECK(g.kernel_h >= 1 && g.kernel_w >= 1, op, ": kernel must be >= 1, got (", g.kernel_h, ", ",
                g.kernel_w, ")");
  MINIDET_CHECK(g.stride_h >= 1 && g.stride_w >= 1, op, ": stride must be >= 1 (or 0 for the kernel size), got (",
                o.stride_h, ", ", o.stride_w, ")");
  MINIDET_CHECK(g.pad_h >= 0 && g.pad_w >= 0, op, ": padding must be >= 0, got (", g.pad_h, ", ", g.pad_w, ")");
  MINIDET_CHECK(g.pad_h <= g.kernel_h / 2 && g.pad_w <= g.kernel_w / 2, op,
                ": padding should be at most half of the kernel size, got padding (", g.pad_h, ", ", g.pad_w,
                ") for kernel (", g.kernel_h, ", ", g.kernel_w, ")");
  // An empty plane has no element for a window to pick or average; padding alone would let the kernel-size
  // check below pass and give -inf / NaN outputs (max_pool2d: indices into nothing). PyTorch refuses it too.
  // N = 0 or C = 0 is fine: no planes, an empty output.
  MINIDET_CHECK(input.size(2) >= 1 && input.size(3) >= 1, op,
                ": expected a non-empty plane (H >= 1 and W >= 1), got input of shape ", input.sizes());
  g.planes = input.size(0) * input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  MINIDET_CHECK(g.kernel_h <= g.height + 2 * g.pad_h && g.kernel_w <= g.width + 2 * g.pad_w, op, ": kernel (",
                g.kernel_h, ", ", g.kernel_w, ") is larger than the padded input (", g.height + 2 * g.pad_h, ", ",
                g.width + 2 * g.pad_w, ")");
  g.out_h = pooled_size(g.height, g.kernel_h, g.stride_h, g.pad_h, o.ceil_mode);
  g.out_w = pooled_size(g.width, g.kernel_w, g.stride_w, g.pad_w, o.ceil_mode);
  return g;
}

}  // namespace minidet::ops::detail
