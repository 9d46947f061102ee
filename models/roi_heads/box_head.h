// BoxHead: what the second stage computes from each RoI's pooled features (torchvision's TwoMLPHead followed
// by its FastRCNNPredictor), for K RoIs pooled to (K, F, ph, pw):
//
//   x      = flatten(pooled)                       (K, F ph pw)
//   x      = relu(fc6(x)),  x = relu(fc7(x))        (K, R)       R = representation_size
//   logits = cls_score(x)                           (K, C + 1)   class 0 is background
//   deltas = bbox_pred(x)                           (K, D (C + 1))  columns Dc .. Dc+D-1: the box of class c,
//                                                                 deltas relative to the RoI; D = 4
//                                                                 (BoxCoder), 5 for rotated boxes
//
// Every layer is an nn::Linear with PyTorch's default initialisation (as torchvision's box head), drawn from
// the generator. K = 0 gives empty outputs. Gradients are the Linear and relu ones.
#pragma once

#include <memory>
#include <string>

#include "core/generator.h"
#include "core/tensor.h"
#include "nn/layers/linear.h"
#include "nn/module/module.h"

namespace minidet::models {

struct BoxHeadOutput {
  Tensor class_logits;  // (K, C + 1)
  Tensor box_deltas;    // (K, D (C + 1))
};

class BoxHead final : public nn::Module {
 public:
  // in_features = F * ph * pw of the pooled RoIs; num_classes = C (without background); box_dim = D.
  BoxHead(int64_t in_features, int64_t representation_size, int64_t num_classes, Generator* generator = nullptr,
          int64_t box_dim = 4);
  BoxHeadOutput forward(const Tensor& pooled);
  std::string extra_repr() const override;

  std::shared_ptr<nn::Linear> fc6, fc7, cls_score, bbox_pred;

 private:
  int64_t in_features_, num_classes_;
};

}  // namespace minidet::models
