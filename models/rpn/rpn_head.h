// RPNHead: the Region Proposal Network's head, shared by every position of the feature map (Ren et al.
// 2015; torchvision's RPNHead).
//
//   t          = ReLU(conv3x3(features))                 (N, F, h, w), padding 1: the same size
//   objectness = conv1x1(t) -> (N, A, h, w)              one logit per anchor: "is there an object here?"
//   deltas     = conv1x1(t) -> (N, DA, h, w)             D deltas per anchor: (dx, dy, dw, dh) for the BoxCoder
//                                                        (D = 4), plus da for rotated anchors (D = 5)
//
// A is the number of anchors per position (AnchorGenerator::num_anchors_per_location). All three convs
// start from N(0, 0.01^2) weights and zero biases, as torchvision's, so the first objectness is about 0
// (probability 1/2) and the first deltas are about 0 (proposals = anchors).
//
// flatten_objectness / flatten_deltas put the outputs in the anchors' order (models/anchors): index
// (y * w + x) * A + a, the order of (N, h, w, A):
//   objectness (N, A, h, w)  -> permute (N, h, w, A)    -> (N, h*w*A)
//   deltas     (N, DA, h, w) -> view (N, A, D, h, w) -> permute (N, h, w, A, D) -> (N, h*w*A, D)
// Both are differentiable views (and one copy), so gradients flow back into the head.
#pragma once

#include <memory>
#include <string>

#include "core/generator.h"
#include "nn/layers/conv2d.h"
#include "nn/module/module.h"

namespace minidet::models {

struct RPNHeadOutput {
  Tensor objectness;  // (N, A, h, w)
  Tensor deltas;      // (N, DA, h, w)
};

class RPNHead final : public nn::Module {
 public:
  // box_dim D: 4 for axis-aligned anchors, 5 for rotated ones (models/common/box_type.h).
  RPNHead(int64_t in_channels, int64_t num_anchors, Generator* generator = nullptr, int64_t box_dim = 4);
  RPNHeadOutput forward(const Tensor& features);
  // forward(features), or the replacement the engine installed (nn::Module::replace_forward).
  RPNHeadOutput operator()(const Tensor& features);
  std::string extra_repr() const override;

  std::shared_ptr<nn::Conv2d> conv, cls_logits, bbox_pred;
  int64_t num_anchors;
  int64_t box_dim;
};

Tensor flatten_objectness(const Tensor& objectness);  // (N, A, h, w) -> (N, h*w*A)
Tensor flatten_deltas(const Tensor& deltas, int64_t box_dim = 4);  // (N, DA, h, w) -> (N, h*w*A, D)

}  // namespace minidet::models
