#include "models/rpn/rpn_loss.h"

#include <algorithm>
#include <vector>

#include "core/factories.h"
#include "models/common/box_type.h"
#include "models/matcher/matcher.h"
#include "models/sampler/sampler.h"
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

// anchors (K, D), every gt_boxes[n] (M_n, D) on their device and dtype, D = 4 or 5 (the box type).
BoxType check_anchors_and_boxes(const char* op, const Tensor& anchors, const std::vector<Tensor>& gt_boxes) {
  ops::check_defined(op, anchors, "anchors");
  ops::check_floating(op, anchors, "anchors");
  const BoxType type = box_type_of(op, anchors, "anchors");
  const int64_t d = box_dim(type);
  MINIDET_CHECK(anchors.dim() == 2, op, ": expected anchors of shape (K, ", d, "), got ", anchors.sizes());
  for (size_t n = 0; n < gt_boxes.size(); ++n) {
    const Tensor& gt = gt_boxes[n];
    ops::check_defined(op, gt, "gt_boxes");
    MINIDET_CHECK(gt.dim() == 2 && gt.size(1) == d, op, ": expected gt_boxes[", n, "] of shape (M, ", d, ") ",
                  box_layout(type), " like the anchors, got ", gt.sizes());
    ops::check_same_device(op, gt, "gt_boxes", anchors, "anchors");
    ops::check_same_dtype(op, gt, "gt_boxes", anchors, "anchors");
  }
  return type;
}

}  // namespace

RPNTargets rpn_targets(const Tensor& anchors, const std::vector<Tensor>& gt_boxes, const RPNLossOptions& options) {
  const BoxType type = check_anchors_and_boxes("rpn_targets", anchors, gt_boxes);
  NoGradGuard no_grad;  // targets are constants of the loss
  const Matcher matcher(options.fg_iou_threshold, options.bg_iou_threshold, /*allow_low_quality_matches=*/true);
  const BoxTypeCoder coder(type, options.box_coder_weights, options.box_coder_angle_weight, options.rotated_offsets,
                           options.rotated_edge_swap);
  const Tensor anchor_boxes = anchors.detach();
  const int64_t images = static_cast<int64_t>(gt_boxes.size()), k = anchors.size(0), d = box_dim(type);
  const TensorOptions index_options(kInt64, anchors.device());
  if (images == 0)
    return {zeros({0, k}, index_options), zeros({0, k, d}, anchors.options()), zeros({0, k, d}, anchors.options())};
  // All images in one pass (one IoU, one Matcher call: a fixed number of kernels for any batch), their objects
  // padded to the most any image has, W, with the all-zero box. Its IoU with every anchor is 0, so
  // it never beats a real object (a tie at 0 goes to the first row, a real one), never makes a low-quality
  // match (the Matcher skips objects whose best overlap is 0) and leaves an image without objects all
  // background: what one Matcher call per image would give (tested).
  int64_t widest = 1;
  for (const Tensor& gt : gt_boxes) widest = std::max(widest, gt.size(0));
  const Tensor padding = zeros({widest, d}, anchors.options());
  std::vector<Tensor> rows;
  for (const Tensor& gt : gt_boxes) {
    rows.push_back(gt.detach());
    if (gt.size(0) < widest) rows.push_back(narrow(padding, 0, 0, widest - gt.size(0)));
  }
  const Tensor padded = cat(rows, 0);  // (B * W, 4)
  const Tensor quality = options.match_bounding_boxes
                             ? pairwise_iou(BoxType::kAxisAligned, bounding_boxes(type, padded),
                                            bounding_boxes(type, anchor_boxes))
                             : pairwise_iou(type, padded, anchor_boxes);
  const MatchResult match = matcher(quality.view({images, widest, k}));
  // Each anchor's matched object as onehot(matches) @ objects, per image: (B, K, W) @ (B, W, D), exact, and
  // unlike an index gather free of a host-side check of the indices (a synchronisation on the GPU).
  const Tensor columns = arange(static_cast<double>(widest), index_options).view({1, 1, widest});
  const Tensor one_hot = eq(match.matches.unsqueeze(2), columns).to(anchors.dtype());
  const Tensor positive = eq(match.labels, static_cast<double>(Matcher::kPositive)).unsqueeze(2);
  const Tensor every_image_anchors = anchor_boxes.unsqueeze(0).expand({images, k, d});  // a view
  RPNTargets targets;
  targets.labels = match.labels;
  targets.matched_boxes = where(positive, bmm(one_hot, padded.view({images, widest, d})), every_image_anchors);
  targets.regression = coder.encode(targets.matched_boxes, every_image_anchors);
  return targets;
}

RPNLosses rpn_loss(const Tensor& objectness, const Tensor& deltas, const Tensor& anchors,
                   const std::vector<Tensor>& gt_boxes, Generator* generator, const RPNLossOptions& options) {
  const char* op = "rpn_loss";
  ops::check_defined(op, objectness, "objectness");
  ops::check_defined(op, deltas, "deltas");
  const int64_t d = box_dim(check_anchors_and_boxes(op, anchors, gt_boxes));
  const int64_t images = static_cast<int64_t>(gt_boxes.size()), k = anchors.size(0);
  MINIDET_CHECK(objectness.dim() == 2 && objectness.size(0) == images && objectness.size(1) == k, op,
                ": expected objectness of shape (", images, ", ", k, ") (one row per image, one logit per anchor), got ",
                objectness.sizes());
  MINIDET_CHECK(deltas.dim() == 3 && deltas.size(0) == images && deltas.size(1) == k && deltas.size(2) == d, op,
                ": expected deltas of shape (", images, ", ", k, ", ", d, "), got ", deltas.sizes());
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
