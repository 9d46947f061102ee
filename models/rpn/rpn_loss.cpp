#include "models/rpn/rpn_loss.h"

#include "core/factories.h"
#include "models/box_coder/box_coder.h"
#include "models/matcher/matcher.h"
#include "models/sampler/sampler.h"
#include "ops/boxes/box_iou.h"
#include "ops/common/checks.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/shared_scalar.h"
#include "ops/elementwise/unary.h"
#include "ops/indexing/where.h"
#include "ops/loss/pointwise_loss.h"
#include "ops/matmul/matmul.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/shape.h"

namespace minidet::models {

namespace {

void check_anchors_and_boxes(const char* op, const Tensor& anchors, const std::vector<Tensor>& gt_boxes) {
  ops::check_defined(op, anchors, "anchors");
  ops::check_floating(op, anchors, "anchors");
  MINIDET_CHECK(anchors.dim() == 2 && anchors.size(1) == 4, op, ": expected anchors of shape (K, 4), got ",
                anchors.sizes());
  for (size_t n = 0; n < gt_boxes.size(); ++n) {
    const Tensor& gt = gt_boxes[n];
    ops::check_defined(op, gt, "gt_boxes");
    MINIDET_CHECK(gt.dim() == 2 && gt.size(1) == 4, op, ": expected gt_boxes[", n, "] of shape (M, 4), got ",
                  gt.sizes());
    ops::check_same_device(op, gt, "gt_boxes", anchors, "anchors");
    ops::check_same_dtype(op, gt, "gt_boxes", anchors, "anchors");
  }
}

// gt[matches] for every anchor, as onehot(matches) @ gt: (K, M) @ (M, 4) -> (K, 4).
Tensor take_matched(const Tensor& gt, const Tensor& matches) {
  const int64_t m = gt.size(0);
  if (m == 0) return zeros({matches.size(0), 4}, gt.options());
  const Tensor columns = arange(static_cast<double>(m), TensorOptions(kInt64, gt.device()));
  const Tensor one_hot = eq(matches.unsqueeze(1), columns.unsqueeze(0)).to(gt.dtype());
  return mm(one_hot, gt);
}

}  // namespace

RPNTargets rpn_targets(const Tensor& anchors, const std::vector<Tensor>& gt_boxes, const RPNLossOptions& options) {
  check_anchors_and_boxes("rpn_targets", anchors, gt_boxes);
  NoGradGuard no_grad;  // targets are constants of the loss
  const Matcher matcher(options.fg_iou_threshold, options.bg_iou_threshold, /*allow_low_quality_matches=*/true);
  const BoxCoder coder(options.box_coder_weights);
  const Tensor anchor_boxes = anchors.detach();
  std::vector<Tensor> labels, matched;
  for (const Tensor& gt_in : gt_boxes) {
    const Tensor gt = gt_in.detach();
    const MatchResult match = matcher(box_iou(gt, anchor_boxes));
    const Tensor positive = eq(match.labels, static_cast<double>(Matcher::kPositive)).unsqueeze(1);
    labels.push_back(match.labels);
    matched.push_back(where(positive, take_matched(gt, match.matches), anchor_boxes));
  }
  const int64_t images = static_cast<int64_t>(gt_boxes.size()), k = anchors.size(0);
  if (images == 0)
    return {zeros({0, k}, TensorOptions(kInt64, anchors.device())), zeros({0, k, 4}, anchors.options()),
            zeros({0, k, 4}, anchors.options())};
  RPNTargets targets;
  targets.labels = stack(labels, 0);
  targets.matched_boxes = stack(matched, 0);
  targets.regression = coder.encode(targets.matched_boxes, anchor_boxes.unsqueeze(0).expand({images, k, 4}));
  return targets;
}

RPNLosses rpn_loss(const Tensor& objectness, const Tensor& deltas, const Tensor& anchors,
                   const std::vector<Tensor>& gt_boxes, Generator* generator, const RPNLossOptions& options) {
  const char* op = "rpn_loss";
  ops::check_defined(op, objectness, "objectness");
  ops::check_defined(op, deltas, "deltas");
  check_anchors_and_boxes(op, anchors, gt_boxes);
  const int64_t images = static_cast<int64_t>(gt_boxes.size()), k = anchors.size(0);
  MINIDET_CHECK(objectness.dim() == 2 && objectness.size(0) == images && objectness.size(1) == k, op,
                ": expected objectness of shape (", images, ", ", k, ") (one row per image, one logit per anchor), got ",
                objectness.sizes());
  MINIDET_CHECK(deltas.dim() == 3 && deltas.size(0) == images && deltas.size(1) == k && deltas.size(2) == 4, op,
                ": expected deltas of shape (", images, ", ", k, ", 4), got ", deltas.sizes());
  ops::check_same_device(op, objectness, "objectness", anchors, "anchors");
  ops::check_same_device(op, deltas, "deltas", anchors, "anchors");
  ops::check_same_dtype(op, objectness, "objectness", anchors, "anchors");
  ops::check_same_dtype(op, deltas, "deltas", anchors, "anchors");

  const RPNTargets targets = rpn_targets(anchors, gt_boxes, options);
  SampledMasks sample;
  Tensor positive, sampled, count;
  {
    NoGradGuard no_grad;
    sample = BalancedPositiveNegativeSampler(options.batch_size_per_image, options.positive_fraction)(targets.labels,
                                                                                                      generator);
    positive = sample.positive.to(objectness.dtype());
    sampled = where(sample.positive, sample.positive, sample.negative).to(objectness.dtype());  // pos or neg
    count = clamp_min(sum(sampled), 1.0);  // S, on the device
  }
  BceWithLogitsOptions bce;
  bce.weight = sampled;  // unsampled anchors weigh 0
  bce.reduction = Reduction::Sum;
  const Tensor objectness_loss = div(binary_cross_entropy_with_logits(objectness, positive, bce), count);
  // Per coordinate smooth L1, kept only on positives (where, so that nothing from the others leaks in).
  const Tensor per_coordinate = smooth_l1_loss(deltas, targets.regression, options.smooth_l1_beta, Reduction::None);
  const Tensor on_positives = where(sample.positive.unsqueeze(2), per_coordinate, shared_scalar(0.0, deltas.options()));
  const Tensor box_loss = div(sum(on_positives), count);
  return {objectness_loss, box_loss};
}

}  // namespace minidet::models
