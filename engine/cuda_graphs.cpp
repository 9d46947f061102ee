// CudaGraphs: one GraphedFunction per fixed-shape module, installed as its forward (see cuda_graphs.h).
#include "engine/cuda_graphs.h"

namespace minidet::engine {

CudaGraphs::CudaGraphs(models::FasterRCNN& model) : model_(model) {
  models::Backbone& backbone = *model.backbone;
  models::RPNHead& head = *model.rpn->head;
  backbone_ = std::make_shared<nn::GraphedFunction>(
      "backbone", std::vector<std::shared_ptr<nn::Module>>{model.backbone},
      [&backbone](const std::vector<Tensor>& in) { return std::vector<Tensor>{backbone.forward(in[0])}; });
  rpn_head_ = std::make_shared<nn::GraphedFunction>(
      "rpn.head", std::vector<std::shared_ptr<nn::Module>>{model.rpn->head},
      [&head](const std::vector<Tensor>& in) {
        const models::RPNHeadOutput out = head.forward(in[0]);
        return std::vector<Tensor>{out.objectness, out.deltas};
      });
  backbone.replace_forward([graph = backbone_](const std::vector<Tensor>& in) { return (*graph)(in); });
  head.replace_forward([graph = rpn_head_](const std::vector<Tensor>& in) { return (*graph)(in); });
}

CudaGraphs::~CudaGraphs() {
  model_.backbone->replace_forward(nullptr);
  model_.rpn->head->replace_forward(nullptr);
}

nn::GraphedCounts CudaGraphs::counts() const {
  const nn::GraphedCounts a = backbone_->counts(), b = rpn_head_->counts();
  return {a.eager + b.eager, a.captures + b.captures, a.replays + b.replays};
}

double CudaGraphs::replay_gpu_ms(int rounds) {
  return backbone_->replay_gpu_ms(rounds) + rpn_head_->replay_gpu_ms(rounds);
}

}  // namespace minidet::engine
