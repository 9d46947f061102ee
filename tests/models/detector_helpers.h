// What the detector tests share (axis-aligned and rotated): the training loss composed from the blocks with
// given proposals, the RPN's proposals of a batch, the overfit runs (a fixed batch trained for some steps of
// Adam) and each object's best overlap with a detection of its own class.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "data/loader/loader.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "nn/optim/adam.h"
#include "tests/models/tiny_detector.h"

namespace minidet::test {

// The training loss composed from the blocks with the proposals given: what forward_train computes, except
// that the proposals are an input instead of the RPN's output of this very evaluation (which is discarded).
inline Tensor composed_loss(models::FasterRCNN& model, const TinyBatch& b, const models::PaddedProposals& proposals,
                            uint64_t seed) {
  Generator gen(seed);
  const Tensor features = (*model.backbone)(b.images);
  const models::RPNTrainOutput rpn = model.rpn->forward_train(features, {32, 32}, b.sizes, b.boxes, &gen);
  models::Losses losses = model.roi_heads->forward_train(features, proposals, b.boxes, b.labels, &gen);
  losses["loss_objectness"] = rpn.losses.objectness;
  losses["loss_rpn_box_reg"] = rpn.losses.box;
  return models::FasterRCNN::total_loss(losses);
}

// The RPN's training proposals for `b` at the model's current weights, the sampler seeded `seed`.
inline models::PaddedProposals rpn_proposals_of(models::FasterRCNN& model, const TinyBatch& b, uint64_t seed) {
  NoGradGuard no_grad;
  Generator g(seed);
  const Tensor features = (*model.backbone)(b.images);
  return model.rpn->forward_train(features, {32, 32}, b.sizes, b.boxes, &g).proposals;
}

struct LossDrop {
  double first = 0, last = 0;
};

// `steps` Adam steps on `batch` at learning rate `lr`, the samplers drawing from a Generator seeded `seed`.
inline LossDrop overfit(models::FasterRCNN& model, const data::Batch& batch, int steps, double lr, uint64_t seed) {
  nn::Adam adam({{model.parameters(), lr}});
  Generator gen(seed);
  LossDrop drop;
  for (int step = 0; step < steps; ++step) {
    adam.zero_grad();
    const Tensor loss = models::FasterRCNN::total_loss(model.forward_train(batch, &gen));
    (step == 0 ? drop.first : drop.last) = loss.detach().to(Device::cpu()).to(kFloat64).item<double>();
    loss.backward();
    adam.step();
  }
  return drop;
}

// For every object of every image of `batch` (targets `gt_boxes`), the best overlap(gt, detections) (M, D)
// among the detections of its class, in image order.
inline std::vector<double> best_overlaps(const data::Batch& batch, const std::vector<Tensor>& gt_boxes,
                                         const std::vector<models::Detections>& detections,
                                         const std::function<Tensor(const Tensor&, const Tensor&)>& overlap) {
  std::vector<double> best;
  for (size_t n = 0; n < detections.size(); ++n) {
    const std::vector<double> q = overlap(gt_boxes[n], detections[n].boxes).to(kFloat64).to_vector<double>();
    const std::vector<int64_t> gt_labels = batch.labels[n].to_vector<int64_t>(),
                               labels = detections[n].labels.to_vector<int64_t>();
    const int64_t d = detections[n].boxes.size(0);
    for (size_t m = 0; m < gt_labels.size(); ++m) {
      double b = 0.0;
      for (int64_t j = 0; j < d; ++j)
        if (labels[j] == gt_labels[m]) b = std::max(b, q[m * d + j]);
      best.push_back(b);
    }
  }
  return best;
}

}  // namespace minidet::test
