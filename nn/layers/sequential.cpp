#include "nn/layers/sequential.h"

namespace minidet::nn {

Sequential::Sequential(const std::vector<std::shared_ptr<UnaryModule>>& layers) : Sequential() {
  for (const auto& layer : layers) push_back(layer);
}

void Sequential::push_back(std::shared_ptr<UnaryModule> layer) {
  register_module(std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& layer : layers_) x = (*layer)(x);
  return x;
}

}  // namespace minidet::nn
