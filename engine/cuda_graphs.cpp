// CudaGraphs: one GraphedFunction per fixed-shape stage, installed as its forward (see cuda_graphs.h).
#include "engine/cuda_graphs.h"

#include <map>

namespace minidet::engine {

CudaGraphs::CudaGraphs(models::FasterRCNN& model) : model_(model) {
  models::Backbone& backbone = *model.backbone;
  models::RPNHead& head = *model.rpn->head;
  models::RoIHeads& roi_heads = *model.roi_heads;
  backbone_ = std::make_shared<nn::GraphedFunction>(
      "backbone", std::vector<std::shared_ptr<nn::Module>>{model.backbone},
      [&backbone](const std::vector<Tensor>& in) { return std::vector<Tensor>{backbone.forward(in[0])}; });
  rpn_head_ = std::make_shared<nn::GraphedFunction>(
      "rpn.head", std::vector<std::shared_ptr<nn::Module>>{model.rpn->head},
      [&head](const std::vector<Tensor>& in) {
        const models::RPNHeadOutput out = head.forward(in[0]);
        return std::vector<Tensor>{out.objectness, out.deltas};
      });
  // Inputs in RoIHeads::box_losses' order: features, then the sample's rois, labels, targets and mask.
  box_stage_ = std::make_shared<nn::GraphedFunction>(
      "roi_heads.box_losses", std::vector<std::shared_ptr<nn::Module>>{model.roi_heads},
      [&roi_heads](const std::vector<Tensor>& in) {
        models::RoISample sample;
        sample.rois = in[1];
        sample.labels = in[2];
        sample.regression_targets = in[3];
        sample.valid = in[4];
        const std::map<std::string, Tensor> losses = roi_heads.forward_box_losses(in[0], sample);
        return std::vector<Tensor>{losses.at("loss_classifier"), losses.at("loss_box_reg")};
      });
  backbone.replace_forward([graph = backbone_](const std::vector<Tensor>& in) { return (*graph)(in); });
  head.replace_forward([graph = rpn_head_](const std::vector<Tensor>& in) { return (*graph)(in); });
  roi_heads.replace_forward([graph = box_stage_](const std::vector<Tensor>& in) { return (*graph)(in); });
}

CudaGraphs::~CudaGraphs() {
  model_.backbone->replace_forward(nullptr);
  model_.rpn->head->replace_forward(nullptr);
  model_.roi_heads->replace_forward(nullptr);
}

nn::GraphedCounts CudaGraphs::counts() const {
  nn::GraphedCounts sum;
  for (const auto* graph : {backbone_.get(), rpn_head_.get(), box_stage_.get()}) {
    sum.eager += graph->counts().eager;
    sum.captures += graph->counts().captures;
    sum.replays += graph->counts().replays;
  }
  return sum;
}

double CudaGraphs::replay_gpu_ms(int rounds) {
  double sum = 0;
  for (const auto& [name, ms] : stage_replay_gpu_ms(rounds)) sum += ms;
  return sum;
}

std::vector<std::pair<std::string, double>> CudaGraphs::stage_replay_gpu_ms(int rounds) {
  return {{"backbone", backbone_->replay_gpu_ms(rounds)},
          {"rpn.head", rpn_head_->replay_gpu_ms(rounds)},
          {"roi_heads.box_losses", box_stage_->replay_gpu_ms(rounds)}};
}

}  // namespace minidet::engine
