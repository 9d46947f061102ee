// RPN: the Region Proposal Network as one Module (torchvision's RegionProposalNetwork): anchors, head,
// losses in training, proposals always.
//
//   anchors    = AnchorGenerator(sizes, aspect_ratios).grid_anchors(0, h, w, stride, stride)   (h*w*A, 4), cached
//                (anchors(H, W, {(h, w)}) when H and W are multiples of the stride; its H / h would be wrong
//                otherwise)
//   o, d       = RPNHead(features)   -> flatten_objectness (N, K), flatten_deltas (N, K, 4), K = h*w*A
//   proposals  = rpn_proposals(o, d, anchors, image_sizes, training ? train_proposals : test_proposals)
//   losses     = rpn_loss(o, d, anchors, gt_boxes, generator, loss)   (training only)
// (H, W) is the padded batch size (images.size(2), images.size(3)); features (N, F, h, w).
// Check: h == ceil(H / stride) and w == ceil(W / stride) for the configured stride, with a clear error
// otherwise (the anchors would not cover the image).
// Host synchronisations on CUDA per call: rpn_proposals' 1 (see rpn_proposals.h); rpn_loss adds none.
// Building the anchors (first call per feature size, dtype and device only) copies them to the device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "models/anchors/anchor_generator.h"
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
  RPNLossOptions loss;
  ProposalOptions train_proposals{1000, 300, 0.7, 1e-3, 0.0};
  ProposalOptions test_proposals{500, 100, 0.7, 1e-3, 0.0};
  Generator* generator = nullptr;  // weight initialisation of the head
};

struct RPNOutput {
  std::vector<Tensor> proposals;  // per image (P_n, 4), detached (empty from forward_train_padded)
  PaddedProposals padded;         // defined only by forward_train_padded
  RPNLosses losses;               // defined only by forward_train
};

class RPN final : public nn::Module {
 public:
  explicit RPN(RPNOptions options = {});

  // Proposals and both losses. image_size = (H, W) of the padded batch; image_sizes per image before padding;
  // gt_boxes per image (M_n, 4) on the features' device and dtype. The sampler draws from `generator`.
  RPNOutput forward_train(const Tensor& features, std::array<int64_t, 2> image_size,
                          const std::vector<std::array<int64_t, 2>>& image_sizes,
                          const std::vector<Tensor>& gt_boxes, Generator* generator = nullptr);
  // The same from the head's outputs on `features`, computed by the caller (FasterRCNN may replay the
  // backbone and the head as one CUDA graph), with the proposals as one padded table (rpn_proposals_padded):
  // no host synchronisation.
  RPNOutput forward_train_padded(const Tensor& features, const RPNHeadOutput& head_out,
                                 std::array<int64_t, 2> image_size, const std::vector<std::array<int64_t, 2>>& image_sizes,
                                 const std::vector<Tensor>& gt_boxes, Generator* generator = nullptr);
  // Proposals only (test_proposals), no gradient recorded.
  RPNOutput forward_infer(const Tensor& features, std::array<int64_t, 2> image_size,
                          const std::vector<std::array<int64_t, 2>>& image_sizes);

  // The anchors for a padded batch of H x W with features of h x w (cached by the generator).
  Tensor anchors(std::array<int64_t, 2> image_size, const Tensor& features);
  const RPNOptions& options() const { return options_; }
  std::string extra_repr() const override;

  std::shared_ptr<RPNHead> head;

 private:
  RPNOptions options_;
  AnchorGenerator anchor_generator_;
};

}  // namespace minidet::models
