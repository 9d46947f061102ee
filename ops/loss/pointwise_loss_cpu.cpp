// CPU loops for the pointwise losses: one element at a time through a strided indexer, like the
// elementwise ops. grad_target shares grad_input's (contiguous) layout, so it needs no operand slot.
#include "core/strided_indexer.h"
#include "ops/common/parallel.h"
#include "ops/loss/pointwise_loss_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
void forward_loop(PointwiseLoss kind, T beta, const StridedIndexer<5>& ix, int64_t n, T* loss, const T* input,
                  const T* target, const T* weight, const T* pos_weight) {
#pragma omp parallel for if (n > kParallelAbove)
  for (int64_t i = 0; i < n; ++i) {
    int64_t off[5];
    ix.offsets(i, off);
    loss[off[0]] = weight[off[3]] * pointwise_loss_value(kind, input[off[1]], target[off[2]], pos_weight[off[4]], beta);
  }
}

template <typename T>
void backward_loop(PointwiseLoss kind, T beta, const StridedIndexer<6>& ix, int64_t n, T* grad_input, T* grad_target,
                   const T* grad, const T* input, const T* target, const T* weight, const T* pos_weight) {
#pragma omp parallel for if (n > kParallelAbove)
  for (int64_t i = 0; i < n; ++i) {
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

void pointwise_loss_forward_cpu(PointwiseLoss kind, double beta, const Tensor& loss, const Tensor& input,
                                const Tensor& target, const Tensor& weight, const Tensor& pos_weight) {
  const Shape* strides[5] = {&loss.strides(), &input.strides(), &target.strides(), &weight.strides(),
                             &pos_weight.strides()};
  const StridedIndexer<5> ix = make_indexer<5>(loss.sizes(), strides);
  MINIDET_DISPATCH_FLOATING(loss.dtype(), "pointwise loss", [&] {
    forward_loop<scalar_t>(kind, static_cast<scalar_t>(beta), ix, loss.numel(), loss.data<scalar_t>(),
                           input.data<scalar_t>(), target.data<scalar_t>(), weight.data<scalar_t>(),
                           pos_weight.data<scalar_t>());
  });
}

void pointwise_loss_backward_cpu(PointwiseLoss kind, double beta, const Tensor& grad_input,
                                 const Tensor& grad_target, const Tensor& grad, const Tensor& input,
                                 const Tensor& target, const Tensor& weight, const Tensor& pos_weight) {
  const Shape* strides[6] = {&grad_input.strides(), &grad.strides(), &input.strides(), &target.strides(),
                             &weight.strides(), &pos_weight.strides()};
  const StridedIndexer<6> ix = make_indexer<6>(grad_input.sizes(), strides);
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "pointwise loss backward", [&] {
    backward_loop<scalar_t>(kind, static_cast<scalar_t>(beta), ix, grad_input.numel(), grad_input.data<scalar_t>(),
                            grad_target.defined() ? grad_target.data<scalar_t>() : nullptr, grad.data<scalar_t>(),
                            input.data<scalar_t>(), target.data<scalar_t>(), weight.data<scalar_t>(),
                            pos_weight.data<scalar_t>());
  });
}

}  // namespace minidet::ops::detail
