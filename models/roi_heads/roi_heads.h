// RoIHeads: the second stage of Faster R-CNN (Ren et al. 2015; torchvision's RoIHeads with its
// TwoMLPHead and FastRCNNPredictor). It looks at each proposal of the RPN through RoIAlign, says which
// class it is (or background) and how to move its box onto the object.
//
// Boxes have D columns: 4 (x1, y1, x2, y2), or 5 (cx, cy, w, h, angle) when box_type is rotated, the second
// stage of RRPN (Ma et al. 2018) and detectron2's RROIHeads: the same steps with rotated IoU, rotated
// RoIAlign and five deltas per class (models/common/box_type.h lists what changes).
//
// Shapes, for N images, features (N, F, h, w) of stride s, C object classes (labels 1..C, 0 background),
// per image n its ground truth boxes (M_n, D) with labels (M_n), and the RPN's training proposals as one
// padded table (models/common/padded_proposals.h): boxes (N, P, D), image n's proposals being its first
// counts[n] rows, counts (N) on the device. Mw = max(1, max_n M_n).
//
// Training (forward_train): target assignment (sample_rois_padded), every image at once, per image n:
//   boxes_n   = cat(boxes[n], gt_boxes_n, padding)            (W = P + Mw, D): the ground truth is a proposal
//               too, so every object has at least one perfect positive from the first step
//   Q         = pairwise_iou(gt_boxes_n, boxes_n)              (M_n, W)   box_iou or box_iou_rotated
//   match     = Matcher(0.5, 0.5, no low-quality matches)(Q):  IoU >= 0.5 foreground, < 0.5 background
//   class     = gt_labels_n[matched gt] if foreground, 0 if background; -1 (ignored, never sampled) for the
//               rows of boxes[n] past counts[n] and for the padding (and between the two thresholds when
//               they differ)
//   sample    = BalancedPositiveNegativeSampler(128, 0.25)(class), from the caller's generator
//   slots     = K = min(128, W) rows per image: the sampled candidates in increasing index order
//               (torchvision's where(pos | neg) order), then padding rows marked invalid
//   rois      (N K, 1 + D) rows (n, box); labels (N K) int64; valid (N K) bool
//   targets   (N K, D) = encode(matched gt box, roi) on foreground rows, 0 elsewhere: BoxCoder(10, 10, 5, 5),
//               or RotatedBoxCoder(10, 10, 5, 5, 1)
// Every shape is known from N, P and Mw alone: the host never reads a count. sample_rois is the same
// assignment for per-image proposals (P_n, D), K_n = min(128, P_n + M_n) rows per image; it is the
// reference the padded form is tested against.
//
// Box head (BoxHead), on any rois:
//   pooled    = roi_align(features, rois, 7x7, spatial_scale 1/s, sampling_ratio 2, aligned)  (K, F, 7, 7)
//               (roi_align_rotated for rotated rois: the 7x7 grid turns with the box)
//   x         = relu(fc7(relu(fc6(flatten(pooled)))))                                         (K, R)
//   logits    = cls_score(x)  (K, C + 1);   deltas = bbox_pred(x)  (K, D (C + 1)): one box per class
//
// Losses (roi_heads_loss), with S = the number of valid (sampled) rows, one-hot y of each row's label:
//   classifier = (1 / S) sum_valid  -log_softmax(logits)[label]                     (cross-entropy, mean)
//   box_reg    = (1 / S) sum_{valid, label >= 1} sum_j smooth_l1(deltas[label][j] - targets[j], beta 1/9)
// The box loss reads only the D columns of the row's own class and is divided by all sampled rows, not by
// the positives (as torchvision). Gradients: dclassifier/dlogits = (softmax - y) / S on valid rows;
// dbox_reg/ddeltas = clamp((d - t) / beta, -1, 1) / S on the label's D columns of positive rows, 0 on every
// other column. They flow on through the FC layers and RoIAlign into the features (rois are detached).
//
// Inference (postprocess_detections), per image, with p = softmax(logits):
//   boxes[k, c] = clip(decode(deltas[k, c], roi_k), image)   for c = 1..C (background dropped; rotated
//                 boxes are not clipped)
//   keep candidates (k, c) with p[k, c] > 0.05 and both sides >= 0.01, batched NMS at 0.5 within each class
//   (rotated NMS for rotated boxes), then the 100 best -> boxes (D, 4 or 5), scores (D), labels (D) int64,
//   in decreasing score order.
//
// Host synchronisations on CUDA, counted per call whatever the batch size. minidet queues all work on the
// legacy default stream and copies with cudaMemcpy, so the host waits for every queued kernel at a
// device-to-host copy, and also at a host-to-device copy from pageable memory (an arange, the sampler's
// random priorities); both kinds are counted here.
// - training: device-to-host 1 in roi_align (its check of the rois' values, unless
//   options.check_proposal_values is off), and 1 more when options.check_targets is on (one combined check
//   of every image's labels and boxes); FasterRCNN turns both off, so its training step makes none here.
//   Host-to-device 4: the candidates' positions 0..W-1 (one arange, sliced for every use), each image's
//   candidate count and the images' indices (all images are matched and their slots filled at once), and the
//   sampler's priorities (one sampler call for all images); the loss's class ids are uploaded once per
//   process (shared_arange). Each is a small staged copy that does not wait. Nothing has a data-dependent
//   shape: the proposal counts stay on the device and only mark candidates "ignored", the slot selection is a
//   topk of integer keys, the gathers are exact one-hot products (index_select would check its indices on the
//   host), the classifier loss is log_softmax with a one-hot (cross_entropy would check its targets on the
//   host), and the count of sampled rows lives in the valid mask.
// - inference: the number of detections depends on the data, so the end cannot avoid the host.
//   device-to-host 4: roi_align's check (unless check_proposal_values is off), the count of candidates above
//   the threshold (nonzero), NMS's kept count, and one copy of the kept rows, from which the host picks each
//   image's best (at most a few thousand rows). Host-to-device 2, after them, when nothing is queued any
//   more: every image's boxes and scores in one copy, every label in another (each image's tensors are views
//   into them); the image indices, class ids and slot positions come from shared aranges (uploaded once per
//   batch size, ops/elementwise/shared_scalar.h). None of these counts, and no launch, grows with the number of images:
//   every slot of the padded table is scored, and the slots past an image's count are dropped with the candidates.
#pragma once

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "models/common/box_type.h"
#include "models/common/image_sizes.h"
#include "models/common/padded_proposals.h"
#include "models/roi_heads/box_head.h"
#include "nn/module/module.h"

namespace minidet::models {

struct RoIHeadsOptions {
  // Box head.
  int64_t in_channels = 128;  // F, the features' channels
  int64_t num_classes = 3;    // C object classes; the predictor has C + 1 outputs (0 = background)
  BoxType box_type = BoxType::kAxisAligned;  // rotated: roi_align_rotated, 5 deltas per class
  int64_t feature_stride = 8; // RoIAlign's spatial_scale is 1 / feature_stride
  int64_t pooled_size = 7;
  int64_t sampling_ratio = 2;
  bool aligned = true;
  int64_t representation_size = 256;  // width of fc6 and fc7
  // Training.
  double fg_iou_threshold = 0.5;  // IoU >= this: foreground
  double bg_iou_threshold = 0.5;  // IoU < this: background (between the two: ignored)
  int64_t batch_size_per_image = 128;
  double positive_fraction = 0.25;
  std::array<double, 4> box_coder_weights = {10.0, 10.0, 5.0, 5.0};
  double box_coder_angle_weight = 1.0;  // rotated boxes only: the weight of da (detectron2's RROIHeads: 1)
  OffsetFrame rotated_offsets = OffsetFrame::kImage;  // rotated boxes only (DetectorConfig::rotated_offsets)
  bool rotated_edge_swap = false;  // rotated boxes only (DetectorConfig::rotated_edge_swap)
  double smooth_l1_beta = 1.0 / 9.0;
  bool check_targets = true;  // check label and box values (one host sync on CUDA); see above
  // Check the proposals' values in roi_align (one host sync on CUDA per call). FasterRCNN turns it off: its
  // proposals come from the RPN, finite by construction (see RoIAlignOptions::check_roi_values).
  bool check_proposal_values = true;
  // Inference.
  double score_threshold = 0.05;
  double nms_threshold = 0.5;
  double min_size = 1e-2;
  int64_t detections_per_image = 100;
  Generator* generator = nullptr;  // weight initialisation
};

// The sampled training rows of a batch (sample_rois_padded, sample_rois).
struct RoISample {
  Tensor rois;                // (K, 1 + D) (image, box), the proposals' dtype and device
  Tensor labels;              // (K) int64: 1..C foreground, 0 background (padding rows: 0)
  Tensor regression_targets;  // (K, D): encoded matched boxes on foreground rows, 0 elsewhere
  Tensor valid;               // (K) bool: the row was sampled (false on padding rows)
};

// One image's detections, on the features' device.
struct Detections {
  Tensor boxes;   // (D, 4) xyxy clipped to the image, or (D, 5) (cx, cy, w, h, angle) for rotated boxes
  Tensor scores;  // (D), decreasing
  Tensor labels;  // (D) int64 in 1..C
};

// Target assignment and sampling (see above), with no host synchronisation: image n's candidates are its
// first counts[n] proposal slots and its objects; every image keeps K = min(batch, P + Mw) rows, the rows
// past its sample being padding (valid false). gt_boxes[n] (M_n, D) shares the proposals' dtype and device;
// gt_labels[n] (M_n) int64 on that device. Nothing is differentiable here (all detached).
RoISample sample_rois_padded(const PaddedProposals& proposals, const std::vector<Tensor>& gt_boxes,
                             const std::vector<Tensor>& gt_labels, const RoIHeadsOptions& options,
                             Generator* generator = nullptr);
// The per-image form, kept as the reference the padded one is tested against: proposals[n] (P_n, 4), K_n =
// min(batch, P_n + M_n) rows for image n. Its candidates' layout differs from the padded one's (P_n + M_n
// per image instead of P + Mw), so the same generator state samples other, equally likely, rows; with a
// slot for every candidate both sample the same rows.
RoISample sample_rois(const std::vector<Tensor>& proposals, const std::vector<Tensor>& gt_boxes,
                      const std::vector<Tensor>& gt_labels, const RoIHeadsOptions& options,
                      Generator* generator = nullptr);

// The two losses (0-dim), keyed "loss_classifier" and "loss_box_reg" as in torchvision.
std::map<std::string, Tensor> roi_heads_loss(const BoxHeadOutput& head, const RoISample& sample,
                                             double smooth_l1_beta = 1.0 / 9.0);

// Per-image detections from the head's outputs on every slot of the padded proposals (N P rows, image by
// image); the slots past an image's count are dropped on the device. From per-image proposals: pad_proposals.
std::vector<Detections> postprocess_detections(const BoxHeadOutput& head, const PaddedProposals& proposals,
                                               const ImageSizes& image_sizes, const RoIHeadsOptions& options);

// Throws when a target breaks the conventions (labels in 1..C, finite boxes with x1 < x2 and y1 < y2, or
// for rotated boxes w > 0 and h > 0),
// naming the first bad image. One host synchronisation on CUDA.
void check_roi_targets(const std::vector<Tensor>& gt_boxes, const std::vector<Tensor>& gt_labels,
                       int64_t num_classes);

class RoIHeads final : public nn::Module {
 public:
  explicit RoIHeads(RoIHeadsOptions options = {});

  // features (N, F, h, w); the RPN's padded proposals (N, P, D) with their counts; one gt_boxes / gt_labels
  // tensor per image. generator: the sampler's (the default generator when null). Returns the losses of
  // roi_heads_loss. Start from per-image proposals with pad_proposals (models/common/padded_proposals.h).
  std::map<std::string, Tensor> forward_train(const Tensor& features, const PaddedProposals& proposals,
                                              const std::vector<Tensor>& gt_boxes,
                                              const std::vector<Tensor>& gt_labels, Generator* generator = nullptr);
  // Detections per image from the RPN's padded proposals (as forward_train; from per-image proposals:
  // pad_proposals); runs without recording gradients.
  std::vector<Detections> forward_infer(const Tensor& features, const PaddedProposals& proposals,
                                        const ImageSizes& image_sizes);
  // RoIAlign over the features, then the box head: the step both of the above share.
  BoxHeadOutput forward_box_head(const Tensor& features, const Tensor& rois);
  // The second stage's losses on the sampled rows: forward_box_head, then roi_heads_loss. forward_train
  // calls this. Its shapes are those of the sample, K = min(batch_size_per_image, P + Mw) rows per image: the
  // same at every step whenever P >= batch_size_per_image (the defaults: P = 2000, 128 rows), else they
  // follow the batch's most objects, Mw. So the engine may replace it with a CUDA graph's replay
  // (nn::Module::replace_forward; the replacement takes features, rois, labels, regression_targets, valid
  // and returns loss_classifier, loss_box_reg), which captures again when the shapes change.
  std::map<std::string, Tensor> box_losses(const Tensor& features, const RoISample& sample);
  // box_losses' own code, which the replacement records.
  std::map<std::string, Tensor> forward_box_losses(const Tensor& features, const RoISample& sample);

  const RoIHeadsOptions& options() const { return options_; }
  std::shared_ptr<BoxHead> box_head;

 private:
  RoIHeadsOptions options_;
};

}  // namespace minidet::models
