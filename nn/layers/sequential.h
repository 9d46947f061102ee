// Sequential: runs its layers one after another; layer i is registered under the name "i".
//
//   auto net = std::make_shared<nn::Sequential>();
//   net->push_back(std::make_shared<nn::Linear>(4, 16));
//   net->push_back(std::make_shared<nn::ReLU>());
//   Tensor y = net->forward(x);
#pragma once

#include <memory>
#include <vector>

#include "nn/module/module.h"

namespace minidet::nn {

class Sequential final : public UnaryModule {
 public:
  Sequential() : UnaryModule("Sequential") {}
  explicit Sequential(const std::vector<std::shared_ptr<UnaryModule>>& layers);
  void push_back(std::shared_ptr<UnaryModule> layer);
  Tensor forward(const Tensor& input) override;
  size_t size() const { return layers_.size(); }
  const std::shared_ptr<UnaryModule>& operator[](size_t i) const { return layers_.at(i); }

 private:
  std::vector<std::shared_ptr<UnaryModule>> layers_;
};

}  // namespace minidet::nn
