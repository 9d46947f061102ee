// RPN: the Region Proposal Network as one Module (Ren et al. 2015; torchvision's RegionProposalNetwork):
// anchors, head, losses in training, proposals always.
//
// For N images padded to H x W, features (N, F, h, w) and A anchors per position (K = h*w*A), boxes of D
// columns (box_type: 4 axis-aligned, 5 rotated, models/common/box_type.h):
//   anchors    = AnchorGenerator(sizes, aspect_ratios).grid_anchors(0, h, w, stride, stride)   (K, 4), cached
//                (not anchors(H, W, {(h, w)}): its stride H / h is wrong when H is not a multiple of it);
//                rotated: RotatedAnchorGenerator(sizes, aspect_ratios, angles), (K, 5), RRPN's anchors
//   o, d       = (*head)(features) -> flatten_objectness (N, K), flatten_deltas (N, K, D)
// Training (forward_train):
//   losses     = rpn_loss(o, d, anchors, gt_boxes, generator, loss)   BCE on the sampled anchors, smooth L1
//                on their positives (models/rpn/rpn_loss.h)
//   proposals  = rpn_proposals_padded(o, d, anchors, image_sizes, train_proposals)   one (N, P, D) table and
//                counts (N) on the device: image n's proposals are its first counts[n] rows, detached
//                (models/common/padded_proposals.h), what RoIHeads::forward_train samples from
// Inference (forward_infer), no gradient recorded:
//   proposals  = rpn_proposals_padded(o, d, anchors, image_sizes, test_proposals)   the same kind of table,
//                what RoIHeads::forward_infer scores (rpn_proposals gives per-image tensors instead)
// (*head)(features) is the head's operator(), as PyTorch's module(x): its forward, or the replay of that
// same forward which the training engine installed (engine/cuda_graphs.h).
// Check: h == ceil(H / stride) and w == ceil(W / stride) for the configured stride, with a clear error
// otherwise (the anchors would not cover the image).
// Host synchronisations on CUDA per call: none (rpn_loss and rpn_proposals_padded keep every shape fixed and
// every count on the device), so the host queues the second stage while the GPU still runs the first.
// Building the anchors (first call per feature size, dtype and device only) copies them to the device.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include <optional>

#include "models/anchors/anchor_generator.h"
#include "models/anchors/rotated_anchor_generator.h"
#include "models/common/box_type.h"
#include "models/common/image_sizes.h"
#include "models/common/padded_proposals.h"
#include "models/rpn/rpn_head.h"
#include "models/rpn/rpn_loss.h"
#include "models/rpn/rpn_proposals.h"
#include "nn/module/module.h"

namespace minidet::models {

struct RPNOptions {
  int64_t in_channels = 128;
  int64_t feature_stride = 8;
  std::vector<double> anchor_sizes = {16, 32, 64};
  std::vector<double> aspect_ratios = {0.5, 1.0, 2.0};
  BoxType box_type = BoxType::kAxisAligned;
  // Rotated anchors only: their angles, in degrees as in detectron2's ANCHOR_GENERATOR.ANGLES (turned into
  // radians and normalised by the generator). Six steps of 30 degrees cover every orientation once.
  std::vector<double> anchor_angles_degrees = {-90, -60, -30, 0, 30, 60};
  RPNLossOptions loss;
  ProposalOptions train_proposals{1000, 300, 0.7, 1e-3, 0.0};
  ProposalOptions test_proposals{500, 100, 0.7, 1e-3, 0.0};
  Generator* generator = nullptr;  // weight initialisation of the head
};

struct RPNTrainOutput {
  PaddedProposals proposals;  // (N, P, D) and counts (N), detached
  RPNLosses losses;           // objectness and box, 0-dim
};

class RPN final : public nn::Module {
 public:
  explicit RPN(RPNOptions options = {});

  // Both losses and the training proposals. image_size = (H, W) of the padded batch; image_sizes per image
  // before padding; gt_boxes per image (M_n, D) on the features' device and dtype. The sampler draws from
  // `generator` (the default generator when null).
  RPNTrainOutput forward_train(const Tensor& features, std::array<int64_t, 2> image_size,
                               const ImageSizes& image_sizes, const std::vector<Tensor>& gt_boxes,
                               Generator* generator = nullptr);
  // The proposals with test_proposals, as one padded table as in training, no gradient recorded.
  PaddedProposals forward_infer(const Tensor& features, std::array<int64_t, 2> image_size,
                                const ImageSizes& image_sizes);

  // The anchors for a padded batch of H x W with features of h x w (cached by the generator).
  Tensor anchors(std::array<int64_t, 2> image_size, const Tensor& features);
  const RPNOptions& options() const { return options_; }
  std::string extra_repr() const override;

  std::shared_ptr<RPNHead> head;

 private:
  RPNOptions options_;
  AnchorGenerator anchor_generator_;
  std::optional<RotatedAnchorGenerator> rotated_anchor_generator_;  // box_type kRotated
};

}  // namespace minidet::models
