// cross_entropy: validation (including every target value), the fused per-sample kernel, the reduction,
// and the autograd record. Formulas in cross_entropy.h.
#include "ops/loss/cross_entropy.h"

#include <vector>

#include "autograd/function.h"
#include "core/factories.h"
#include "core/reduce_sum.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/elementwise/binary.h"
#include "ops/loss/cross_entropy_kernels.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;

// ---- device switches -----------------------------------------------------------------------------------

namespace ops::detail {

void cross_entropy_forward_kernel(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                  const CrossEntropyParams& params, const Tensor& loss, const Tensor& target_weight,
                                  const Tensor& lse) {
  if (logits.size(0) == 0) return;
  MINIDET_DEVICE_SWITCH(logits, cross_entropy_forward_cpu(logits, target, weight, params, loss, target_weight, lse),
                        cross_entropy_forward_cuda(logits, target, weight, params, loss, target_weight, lse));
}

void cross_entropy_backward_kernel(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                   const Tensor& lse, const Tensor& grad, int64_t grad_stride,
                                   const CrossEntropyParams& params, const Tensor& grad_logits) {
  if (grad_logits.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(
      logits, cross_entropy_backward_cpu(logits, target, weight, lse, grad, grad_stride, params, grad_logits),
      cross_entropy_backward_cuda(logits, target, weight, lse, grad, grad_stride, params, grad_logits));
}

}  // namespace ops::detail

namespace {

constexpr const char* kCrossEntropyOp = "cross_entropy";

void check_inputs(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  ops::check_defined(kCrossEntropyOp, logits, "logits");
  ops::check_defined(kCrossEntropyOp, target, "target");
  ops::check_floating(kCrossEntropyOp, logits, "logits");
  MINIDET_CHECK(logits.dim() == 2, kCrossEntropyOp, ": expected logits of shape (N, C), got ", logits.sizes());
  MINIDET_CHECK(target.dtype() == kInt64, kCrossEntropyOp, ": expected target of dtype int64 (class indices), got ",
                target.dtype());
  MINIDET_CHECK(target.dim() == 1 && target.size(0) == logits.size(0), kCrossEntropyOp, ": expected target of shape (",
                logits.size(0), ",) to match logits ", logits.sizes(), ", got ", target.sizes());
  ops::check_same_device(kCrossEntropyOp, logits, "logits", target, "target");
  if (options.weight.defined()) {
    const Tensor& weight = options.weight;
    MINIDET_CHECK(weight.dim() == 1 && weight.size(0) == logits.size(1), kCrossEntropyOp,
                  ": expected weight of shape (", logits.size(1), ",) (one per class), got ", weight.sizes());
    ops::check_same_dtype(kCrossEntropyOp, logits, "logits", weight, "weight");
    ops::check_same_device(kCrossEntropyOp, logits, "logits", weight, "weight");
  }
  MINIDET_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0, kCrossEntropyOp,
                ": expected label_smoothing in [0, 1], got ", options.label_smoothing);
}

// Reads every target on the host (a device-to-host copy, so a sync on CUDA): a kernel indexing the logits
// or the weights with an out-of-range class would read out of bounds.
void check_targets(const Tensor& target, int64_t classes, int64_t ignore_index) {
  const std::vector<int64_t> values = target.to_vector<int64_t>();
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t t = values[i];
    MINIDET_CHECK(t == ignore_index || (t >= 0 && t < classes), kCrossEntropyOp, ": target ", t, " at index ", i,
                  " is out of range: expected a class in [0, ", classes, ") or ignore_index ", ignore_index);
  }
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  check_inputs(logits, target, options);
  const int64_t samples = logits.size(0), classes = logits.size(1);
  check_targets(target, classes, options.ignore_index);
  const ops::detail::CrossEntropyParams params{options.ignore_index, options.label_smoothing};
  const bool has_weight = options.weight.defined();

  Tensor loss = empty({samples}, logits.options());
  Tensor target_weight = empty({samples}, logits.options());
  Tensor lse = empty({samples}, logits.options());
  Tensor z, t, w;
  {
    NoGradGuard raw;  // contiguous() is a raw method
    z = logits.contiguous();
    t = target.contiguous();
    if (has_weight) w = options.weight.contiguous();
    ops::detail::cross_entropy_forward_kernel(z, t, w, params, loss, target_weight, lse);
  }

  Tensor out, total_weight;
  switch (options.reduction) {
    case Reduction::None: out = loss; break;
    case Reduction::Sum: out = sum_dims_raw(loss, {}, false); break;
    case Reduction::Mean: {
      NoGradGuard raw;
      total_weight = sum_dims_raw(target_weight, {}, false);
      out = div(sum_dims_raw(loss, {}, false), total_weight);
      break;
    }
  }

  TensorList saved = {z, t, lse};
  if (has_weight) saved.push_back(w);
  if (options.reduction == Reduction::Mean) saved.push_back(total_weight);
  const Reduction reduction = options.reduction;
  // weight is not an input of the record: it is a constant of the loss, like PyTorch's.
  autograd::record(kCrossEntropyOp, {logits, target}, {out}, saved,
                   [params, reduction, has_weight](BackwardContext& ctx, const TensorList& g) -> TensorList {
                     const Tensor z = ctx.saved(0), t = ctx.saved(1), lse = ctx.saved(2);
                     const Tensor w = has_weight ? ctx.saved(3) : Tensor();
                     // Per-sample upstream gradient: g itself (none), or one scalar for every sample (sum),
                     // divided by the total target weight (mean).
                     Tensor grad = g[0];
                     if (reduction == Reduction::Mean) grad = div(grad, ctx.saved(has_weight ? 4 : 3));
                     grad = grad.contiguous();
                     const int64_t grad_stride = reduction == Reduction::None ? 1 : 0;
                     Tensor grad_logits = empty(z.sizes(), z.options());
                     ops::detail::cross_entropy_backward_kernel(z, t, w, lse, grad, grad_stride, params,
                                                                grad_logits);
                     return {grad_logits, Tensor()};
                   });
  return out;
}

}  // namespace minidet
