// Raw cross_entropy kernels: one row (sample) of the contiguous (N, C) logits at a time. The `*_kernel`
// functions choose CPU or CUDA by device (in cross_entropy.cpp). Formulas in ops/loss/cross_entropy.h.
#pragma once

#include "core/tensor.h"

namespace minidet::ops::detail {

struct CrossEntropyParams {
  int64_t ignore_index;
  double label_smoothing;
};

// Per sample: loss (N), the weight of its target (N; 0 when ignored) and lse = log sum exp of its row (N).
// weight may be undefined (all ones).
void cross_entropy_forward_kernel(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                  const CrossEntropyParams& params, const Tensor& loss, const Tensor& target_weight,
                                  const Tensor& lse);
// grad_logits (N, C) from the upstream gradient of each sample's loss, read as grad[i * grad_stride]
// (stride 0 when one scalar gradient applies to every sample).
void cross_entropy_backward_kernel(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                   const Tensor& lse, const Tensor& grad, int64_t grad_stride,
                                   const CrossEntropyParams& params, const Tensor& grad_logits);

void cross_entropy_forward_cpu(const Tensor& logits, const Tensor& target, const Tensor& weight,
                               const CrossEntropyParams& params, const Tensor& loss, const Tensor& target_weight,
                               const Tensor& lse);
void cross_entropy_backward_cpu(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                const Tensor& lse, const Tensor& grad, int64_t grad_stride,
                                const CrossEntropyParams& params, const Tensor& grad_logits);
#if MINIDET_WITH_CUDA
void cross_entropy_forward_cuda(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                const CrossEntropyParams& params, const Tensor& loss, const Tensor& target_weight,
                                const Tensor& lse);
void cross_entropy_backward_cuda(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                 const Tensor& lse, const Tensor& grad, int64_t grad_stride,
                                 const CrossEntropyParams& params, const Tensor& grad_logits);
#endif

}  // namespace minidet::ops::detail
