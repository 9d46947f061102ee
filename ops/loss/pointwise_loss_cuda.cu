// CUDA kernels for the pointwise losses: one thread per element, the same math as the CPU loops
// (pointwise_loss_kernels.h).
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/strided_indexer.h"
#include "ops/loss/pointwise_loss_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void pointwise_loss_forward_kernel_cuda(PointwiseLoss kind, T beta, StridedIndexer<5> ix, int64_t n,
                                                   T* loss, const T* input, const T* target, const T* weight,
                                                   const T* pos_weight) {
  MINIDET_KERNEL_LOOP(i, n) {
    int64_t off[5];
    ix.offsets(i, off);
    loss[off[0]] = weight[off[3]] * pointwise_loss_value(kind, input[off[1]], target[off[2]], pos_weight[off[4]], beta);
  }
}

template <typename T>
__global__ void pointwise_loss_backward_kernel_cuda(PointwiseLoss kind, T beta, StridedIndexer<6> ix, int64_t n,
                                                    T* grad_input, T* grad_target, const T* grad, const T* input,
                                                    const T* target, const T* weight, const T* pos_weight) {
  MINIDET_KERNEL_LOOP(i, n) {
    int64_t off[6];
    ix.offsets(i, off);
    T d_input = T(0), d_target = T(0);
    pointwise_loss_grads(kind, input[off[2]], target[off[3]], pos_weight[off[5]], beta, &d_input, &d_target);
    const T scale = grad[off[1]] * weight[off[4]];
    grad_input[off[0]] = scale * d_input;
    if (grad_target) grad_target[off[0]] = scale * d_target;
  }
}

}  // namespace

void pointwise_loss_forward_cuda(PointwiseLoss kind, double beta, const Tensor& loss, const Tensor& input,
                                 const Tensor& target, const Tensor& weight, const Tensor& pos_weight) {
  cuda::DeviceGuard guard(loss.device());
  const Shape* strides[5] = {&loss.strides(), &input.strides(), &target.strides(), &weight.strides(),
                             &pos_weight.strides()};
  const StridedIndexer<5> ix = make_indexer<5>(loss.sizes(), strides);
  const int64_t n = loss.numel();
  MINIDET_DISPATCH_FLOATING(loss.dtype(), "pointwise loss", [&] {
    pointwise_loss_forward_kernel_cuda<scalar_t>
        <<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
            kind, static_cast<scalar_t>(beta), ix, n, loss.data<scalar_t>(), input.data<scalar_t>(),
            target.data<scalar_t>(), weight.data<scalar_t>(), pos_weight.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("pointwise_loss_forward_kernel_cuda");
  });
}

void pointwise_loss_backward_cuda(PointwiseLoss kind, double beta, const Tensor& grad_input,
                                  const Tensor& grad_target, const Tensor& grad, const Tensor& input,
                                  const Tensor& target, const Tensor& weight, const Tensor& pos_weight) {
  cuda::DeviceGuard guard(grad_input.device());
  const Shape* strides[6] = {&grad_input.strides(), &grad.strides(), &input.strides(), &target.strides(),
                             &weight.strides(), &pos_weight.strides()};
  const StridedIndexer<6> ix = make_indexer<6>(grad_input.sizes(), strides);
  const int64_t n = grad_input.numel();
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "pointwise loss backward", [&] {
    pointwise_loss_backward_kernel_cuda<scalar_t>
        <<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
            kind, static_cast<scalar_t>(beta), ix, n, grad_input.data<scalar_t>(),
            grad_target.defined() ? grad_target.data<scalar_t>() : nullptr, grad.data<scalar_t>(),
            input.data<scalar_t>(), target.data<scalar_t>(), weight.data<scalar_t>(), pos_weight.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("pointwise_loss_backward_kernel_cuda");
  });
}

}  // namespace minidet::ops::detail
