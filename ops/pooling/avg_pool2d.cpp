// avg_pool2d and adaptive_avg_pool2d: one pair of kernels serves both, since each output is a plain mean
// over a rectangle; only the window arithmetic (avg_window in pool2d_kernels.h) differs. Backward needs no
// saved tensor at all: the windows and divisors follow from the geometry.
#include "autograd/function.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/pooling/pool2d.h"
#include "ops/pooling/pool2d_kernels.h"

namespace minidet {
namespace {

using ops::detail::PoolGeometry;

Tensor avg_pool_forward_raw(const Tensor& input_any, const PoolGeometry& g) {
  NoGradGuard raw;
  const Tensor input = input_any.contiguous();
  Tensor output = empty({input.size(0), input.size(1), g.out_h, g.out_w}, input.options());
  if (output.numel() == 0) return output;
  MINIDET_DEVICE_SWITCH(input, ops::detail::avg_pool2d_forward_cpu(input, output, g),
                        ops::detail::avg_pool2d_forward_cuda(input, output, g));
  return output;
}

Tensor avg_pool_backward_raw(const Tensor& grad_output, const Shape& input_sizes, const PoolGeometry& g) {
  NoGradGuard raw;
  const Tensor grad = grad_output.contiguous();
  Tensor grad_input = empty(input_sizes, grad.options());
  if (grad_input.numel() == 0) return grad_input;
  MINIDET_DEVICE_SWITCH(grad, ops::detail::avg_pool2d_backward_cpu(grad, grad_input, g),
                        ops::detail::avg_pool2d_backward_cuda(grad, grad_input, g));
  return grad_input;
}

Tensor avg_pool_record(const char* name, const Tensor& input, const PoolGeometry& g) {
  Tensor output = avg_pool_forward_raw(input, g);
  const Shape input_sizes = input.sizes();
  autograd::record(name, {input}, {output}, {},
                   [g, input_sizes](autograd::BackwardContext&, const autograd::TensorList& grads)
                       -> autograd::TensorList { return {avg_pool_backward_raw(grads[0], input_sizes, g)}; });
  return output;
}

}  // namespace

Tensor avg_pool2d(const Tensor& input, const Pool2dOptions& options) {
  const PoolGeometry g = ops::detail::make_pool_geometry("avg_pool2d", input, options);
  return avg_pool_record("avg_pool2d", input, g);
}

Tensor adaptive_avg_pool2d(const Tensor& input, int64_t out_h, int64_t out_w) {
  const char* op = "adaptive_avg_pool2d";
  ops::check_defined(op, input, "input");
  ops::check_dim(op, input, "input (N, C, H, W)", 4);
  ops::check_floating(op, input, "input");
  MINIDET_CHECK(out_h >= 1 && out_w >= 1, op, ": output size must be >= 1, got (", out_h, ", ", out_w, ")");
  MINIDET_CHECK(input.size(2) >= 1 && input.size(3) >= 1, op, ": expected a non-empty plane, got input of shape ",
                input.sizes());
  PoolGeometry g;
  g.adaptive = true;
  g.planes = input.size(0) * input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.out_h = out_h;
  g.out_w = out_w;
  return avg_pool_record(op, input, g);
}

}  // namespace minidet
