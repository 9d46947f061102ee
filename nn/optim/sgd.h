// Stochastic gradient descent with momentum, Nesterov momentum and (coupled) weight decay.
//
//   d   = g + weight_decay * p
//   buf = d on the first step, then  momentum * buf + (1 - dampening) * d
//   d   = nesterov ? d + momentum * buf : buf
//   p  -= lr * d
//
// The formulation of PyTorch's torch.optim.SGD, so the same hyper-parameters give the same trajectory.
#pragma once

#include "nn/optim/optimizer.h"

namespace minidet::nn {

struct SGDOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
};

class SGD final : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  void step() override;
  NamedTensors state() const override;
  void load_state(const NamedTensors& state) override;

 private:
  SGDOptions options_;
  std::vector<std::vector<Tensor>> momentum_buffers_;  // [group][param], undefined until the first step
};

}  // namespace minidet::nn
