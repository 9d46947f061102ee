// Adam (Kingma & Ba 2015) and AdamW (Loshchilov & Hutter 2019).
//
//   Adam:  g = g + weight_decay * p            (L2 penalty folded into the gradient)
//   AdamW: p = p * (1 - lr * weight_decay)     (decay decoupled from the adaptive step)
//   m = beta1 m + (1 - beta1) g          v = beta2 v + (1 - beta2) g^2
//   p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
//
// The bias corrections 1 - beta^t undo the zero start of m and v; t counts this parameter's steps.
#pragma once

#include "nn/optim/optimizer.h"

namespace minidet::nn {

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool decoupled_weight_decay = false;  // true: AdamW
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});
  void step() override;
  NamedTensors state() const override;
  void load_state(const NamedTensors& state) override;

 private:
  struct ParamState {
    int64_t step = 0;
    Tensor exp_avg, exp_avg_sq;
  };
  AdamOptions options_;
  std::vector<std::vector<ParamState>> state_;  // [group][param]
};

// AdamW: Adam with decoupled weight decay (default weight decay 1e-2 in each group is the caller's choice).
class AdamW final : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamOptions options = {})
      : Adam(std::move(groups), with_decoupled(options)) {}

 private:
  static AdamOptions with_decoupled(AdamOptions o) {
    o.decoupled_weight_decay = true;
    return o;
  }
};

}  // namespace minidet::nn
