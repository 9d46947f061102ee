// max_pool2d: validation, the autograd record (saves the argmax indices, not the input), dispatch.
#include "autograd/function.h"
#include "core/factories.h"
#include "ops/common/device_switch.h"
#include "ops/pooling/pool2d.h"
#include "ops/pooling/pool2d_kernels.h"

namespace minidet {
namespace {

using ops::detail::PoolGeometry;

Tensor max_pool2d_backward_raw(const Tensor& grad_output, const Tensor& indices, const Shape& input_sizes,
                               const PoolGeometry& g) {
  NoGradGuard raw;
  const Tensor grad = grad_output.contiguous();
  Tensor grad_input = empty(input_sizes, grad.options());
  if (grad_input.numel() == 0) return grad_input;
  MINIDET_DEVICE_SWITCH(grad, ops::detail::max_pool2d_backward_cpu(grad, indices, grad_input, g),
                        ops::detail::max_pool2d_backward_cuda(grad, indices, grad_input, g));
  return grad_input;
}

}  // namespace

MaxPool2dResult max_pool2d_with_indices(const Tensor& input_any, const Pool2dOptions& options) {
  const PoolGeometry g = ops::detail::make_pool_geometry("max_pool2d", input_any, options);
  MaxPool2dResult result;
  {
    NoGradGuard raw;
    const Tensor input = input_any.contiguous();
    const Shape out_sizes = {input.size(0), input.size(1), g.out_h, g.out_w};
    result.output = empty(out_sizes, input.options());
    result.indices = empty(out_sizes, TensorOptions(kInt64, input.device()));
    if (result.output.numel() > 0)
      MINIDET_DEVICE_SWITCH(input, ops::detail::max_pool2d_forward_cpu(input, result.output, result.indices, g),
                            ops::detail::max_pool2d_forward_cuda(input, result.output, result.indices, g));
  }
  const Shape input_sizes = input_any.sizes();
  autograd::record("max_pool2d", {input_any}, {result.output}, {result.indices},
                   [g, input_sizes](autograd::BackwardContext& ctx, const autograd::TensorList& grads)
                       -> autograd::TensorList {
                     return {max_pool2d_backward_raw(grads[0], ctx.saved(0), input_sizes, g)};
                   });
  return result;
}

Tensor max_pool2d(const Tensor& input, const Pool2dOptions& options) {
  return max_pool2d_with_indices(input, options).output;
}

}  // namespace minidet
