// The RPN's training targets and losses (Ren et al. 2015; torchvision's RegionProposalNetwork).
//
// Assignment, per image, for K anchors (K, D) and that image's M ground-truth boxes (M, D), D = 4 for
// axis-aligned boxes and 5 for rotated ones (the box type of the anchors, models/common/box_type.h):
//   Q        = pairwise_iou(gt, anchors)                   (M, K)   box_iou or box_iou_rotated
//   matches, labels = Matcher(0.7, 0.3, allow_low_quality_matches = true)(Q)
//                                                          1 object, 0 background, -1 ignored
//   matched  = gt[matches] where labels == 1, else the anchor itself   (K, D)
//   targets  = encode(matched, anchors)                                (K, D)  (0 where not positive)
//              BoxCoder(1, 1, 1, 1), or RotatedBoxCoder(1, 1, 1, 1, 1) for rotated anchors
// gt[matches] is computed as a one-hot product, onehot(matches) (K, M) @ gt (M, D): exact (one non-zero
// term per row) and free of the host-side index check that index_select would need on CUDA.
//
// Sampling, for the whole batch at once: BalancedPositiveNegativeSampler(256, 0.5) on the (N, K) labels,
// from the caller's generator, gives masks pos and neg; sampled = pos or neg, S = number sampled in the
// batch.
//
// Losses, with o the objectness logits (N, K) and d the deltas (N, K, D) in anchor order
// (flatten_objectness / flatten_deltas):
//   objectness = (1 / S) sum over sampled (n, k) of BCE-with-logits(o[n, k], pos[n, k])
//   box        = (1 / S) sum over pos (n, k) of sum_c smooth_l1(d[n, k, c] - targets[n, k, c], beta = 1/9)
// The box loss is normalised by all sampled anchors, not by the positives, as in torchvision. S is a device
// tensor (clamped to >= 1 so a batch without anchors gives 0, not NaN): nothing goes to the host.
//
// Gradients: d objectness / d o[n, k] = (sigmoid(o) - pos) / S on sampled anchors, 0 elsewhere;
// d box / d d[n, k, c] = clamp((d - t) / beta, -1, 1) / S on positives, 0 elsewhere. Nothing flows into the
// anchors, the ground truth or the choices (matching and sampling are discrete).
//
// An image without objects (M = 0) has every anchor background: it adds objectness terms and no box terms.
// Ground-truth boxes must be valid (x1 < x2, y1 < y2, finite; rotated: w, h > 0, finite): the detector checks
// them at its boundary.
// Device syncs: none (box_iou, the matcher, the sampler and the losses all stay on the device).
#pragma once

#include <array>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "models/box_coder/rotated_box_coder.h"

namespace minidet::models {

struct RPNLossOptions {
  double fg_iou_threshold = 0.7;
  double bg_iou_threshold = 0.3;
  int64_t batch_size_per_image = 256;
  double positive_fraction = 0.5;
  double smooth_l1_beta = 1.0 / 9.0;
  std::array<double, 4> box_coder_weights = {1.0, 1.0, 1.0, 1.0};
  double box_coder_angle_weight = 1.0;  // rotated anchors only: the weight of da
  OffsetFrame rotated_offsets = OffsetFrame::kImage;  // rotated anchors only (DetectorConfig::rotated_offsets)
  bool rotated_edge_swap = false;  // rotated anchors only (DetectorConfig::rotated_edge_swap)
  // Rotated anchors only: match anchors and objects by the IoU of their axis-aligned bounding boxes instead of
  // their rotated IoU, as the RPNs of RoI Transformer and Oriented R-CNN assign their horizontal anchors (with
  // anchor_angles_degrees = {0}). A thin object at any angle then has the anchors around its bounding box as
  // positives, where rotated IoU leaves it little more than its one best anchor; the regression still goes
  // to the rotated box.
  bool match_bounding_boxes = false;
};

struct RPNTargets {
  Tensor labels;          // (N, K) int64: 1 object, 0 background, -1 ignored
  Tensor matched_boxes;   // (N, K, D): the matched ground truth of positives, the anchor elsewhere
  Tensor regression;      // (N, K, D): the encoding of matched_boxes against the anchors
};

struct RPNLosses {
  Tensor objectness;  // 0-dim
  Tensor box;         // 0-dim
};

// Labels and regression targets for every anchor of every image (no sampling). anchors (K, D);
// gt_boxes[n] (M_n, D) on the anchors' device and dtype.
RPNTargets rpn_targets(const Tensor& anchors, const std::vector<Tensor>& gt_boxes, const RPNLossOptions& options = {});

// Both losses. objectness (N, K) and deltas (N, K, D) in anchor order; anchors (K, D); one gt tensor per
// image. The sampler draws from `generator` (the default generator when null).
RPNLosses rpn_loss(const Tensor& objectness, const Tensor& deltas, const Tensor& anchors,
                   const std::vector<Tensor>& gt_boxes, Generator* generator = nullptr,
                   const RPNLossOptions& options = {});

}  // namespace minidet::models
