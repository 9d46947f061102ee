// roi_heads_loss: cross-entropy and class-specific smooth L1 over the sampled rows (math in roi_heads.h).
#include "models/common/box_type.h"
#include "models/roi_heads/roi_heads.h"
#include "ops/common/checks.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/shared_scalar.h"
#include "ops/elementwise/unary.h"
#include "ops/indexing/where.h"
#include "ops/loss/pointwise_loss.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/shape.h"
#include "ops/softmax/softmax.h"

namespace minidet::models {

std::map<std::string, Tensor> roi_heads_loss(const BoxHeadOutput& head, const RoISample& sample,
                                             double smooth_l1_beta) {
  const char* op = "roi_heads_loss";
  const Tensor &logits = head.class_logits, &deltas = head.box_deltas;
  ops::check_defined(op, logits, "class_logits");
  ops::check_defined(op, deltas, "box_deltas");
  ops::check_floating(op, logits, "class_logits");
  MINIDET_CHECK(logits.dim() == 2 && logits.size(1) >= 2, op,
                ": expected class_logits of shape (K, C + 1) with C >= 1, got ", logits.sizes());
  const int64_t rows = logits.size(0), classes = logits.size(1);
  // D deltas per class: 4, or 5 for rotated boxes, as many as the regression targets have columns.
  MINIDET_CHECK(sample.regression_targets.defined() && sample.regression_targets.dim() == 2, op,
                ": expected regression targets of shape (", rows, ", D)");
  const int64_t d = box_dim(box_type_of(op, sample.regression_targets, "regression targets"));
  MINIDET_CHECK(deltas.dim() == 2 && deltas.size(0) == rows && deltas.size(1) == d * classes, op,
                ": expected box_deltas of shape (", rows, ", ", d * classes, "), got ", deltas.sizes());
  MINIDET_CHECK(sample.labels.defined() && sample.labels.dtype() == kInt64 && sample.labels.dim() == 1 &&
                    sample.labels.size(0) == rows,
                op, ": expected int64 sample labels of shape (", rows, ")");
  MINIDET_CHECK(sample.valid.defined() && sample.valid.dtype() == kBool && sample.valid.sizes() == Shape{rows}, op,
                ": expected a bool valid mask of shape (", rows, ")");
  MINIDET_CHECK(sample.regression_targets.size(0) == rows, op, ": expected regression targets of shape (", rows,
                ", ", d, "), got ", sample.regression_targets.sizes());
  ops::check_same_dtype(op, deltas, "box_deltas", logits, "class_logits");
  ops::check_same_dtype(op, sample.regression_targets, "regression_targets", logits, "class_logits");
  ops::check_same_device(op, deltas, "box_deltas", logits, "class_logits");
  ops::check_same_device(op, sample.labels, "labels", logits, "class_logits");
  ops::check_same_device(op, sample.valid, "valid", logits, "class_logits");
  ops::check_same_device(op, sample.regression_targets, "regression_targets", logits, "class_logits");

  Tensor one_hot, positive, count;
  {
    NoGradGuard no_grad;  // the labels and masks are constants of the loss
    // Shared, not a fresh arange: no upload at each step, so a CUDA graph can record this loss.
    const Tensor class_ids = shared_arange(classes, TensorOptions(kInt64, logits.device()));
    one_hot = eq(sample.labels.unsqueeze(1), class_ids.unsqueeze(0)).to(logits.dtype());  // (K, C + 1)
    positive = where(sample.valid, ge(sample.labels, 1.0), sample.valid);                  // valid and label >= 1
    count = clamp_min(sum(sample.valid.to(logits.dtype())), 1.0);  // S on the device (>= 1: no 0 / 0)
  }
  const Tensor zero = shared_scalar(0.0, logits.options());

  // Cross-entropy: -log p[label] picked by the one-hot (exact: a single non-zero term per row). Padding rows
  // are replaced by 0 with where, so they add nothing and get no gradient.
  const Tensor nll = neg(sum(mul(one_hot, log_softmax(logits, 1)), {1}));
  const Tensor classifier = div(sum(where(sample.valid, nll, zero)), count);

  // The D deltas of each row's own class: (K, C + 1, D) times the one-hot over classes, summed over classes.
  const Tensor own_deltas = sum(mul(reshape(deltas, {rows, classes, d}), one_hot.unsqueeze(2)), {1});
  const Tensor per_coordinate = smooth_l1_loss(own_deltas, sample.regression_targets, smooth_l1_beta, Reduction::None);
  const Tensor box_reg = div(sum(where(positive.unsqueeze(1), per_coordinate, zero)), count);
  return {{"loss_classifier", classifier}, {"loss_box_reg", box_reg}};
}

}  // namespace minidet::models
