// Optimizer: updates parameters from their .grad(), group by group.
//
// Parameters come in groups, each with its own learning rate and weight decay, so that (as detectron2 does)
// norm-layer and bias parameters can skip weight decay:
//
//   nn::SGDOptions options;
//   options.momentum = 0.9;
//   nn::SGD sgd({{decay_params, /*lr=*/0.02, /*weight_decay=*/1e-4},
//                {norm_and_bias_params, 0.02, 0.0}}, options);
//   loss.backward(); sgd.step(); sgd.zero_grad();
//
// Parameters whose .grad() is undefined are skipped (they took no part in this step's loss). Updates run
// under no-grad through fused kernels (one pass per parameter: read p, g and state, write p and state; Adam
// updates up to 48 parameters per launch on the GPU, see optim_kernels.h).
// state() names every state tensor for checkpoints; load_state() checks them all before changing any.
#pragma once

#include <string>
#include <vector>

#include "nn/module/module.h"

namespace minidet::nn {

struct ParamGroup {
  std::vector<Tensor> params;
  double lr = 0.01;
  double weight_decay = 0.0;
  double initial_lr = -1.0;  // set by the first LR scheduler: the base its factors multiply (as PyTorch does)
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamGroup> groups);
  virtual ~Optimizer() = default;

  virtual void step() = 0;
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

  // Every state tensor by a stable name, "group<g>.param<i>.<what>" (e.g. group0.param3.exp_avg).
  virtual NamedTensors state() const = 0;
  // Restores state() output; all names and shapes are checked first, so a mismatch changes nothing.
  virtual void load_state(const NamedTensors& state) = 0;

 protected:
  // Parses "group<g>.param<i>.<what>" and checks g, i and the shape against that parameter.
  struct StateKey {
    size_t group, param;
    std::string what;
  };
  StateKey parse_state_name(const std::string& name, const Tensor& value, bool like_param) const;
  // State tensors follow their parameter: after Module::to() moved the parameter, its state is moved on the
  // next step (as PyTorch's load_state_dict casts state to the parameter's device and dtype).
  static void follow_param(Tensor& state, const Tensor& param) {
    if (state.defined() && (state.device() != param.device() || state.dtype() != param.dtype()))
      state = state.to(param.options());
  }
  // Calls visit(group, g, i, param, grad) for every parameter that has a gradient, under no-grad, with the
  // gradient made contiguous: the loop every step() shares.
  template <typename Visit>
  void for_each_param_with_grad(Visit visit) {
    NoGradGuard no_grad;
    for (size_t g = 0; g < groups_.size(); ++g) {
      for (size_t i = 0; i < groups_[g].params.size(); ++i) {
        const Tensor& p = groups_[g].params[i];
        const Tensor grad = p.grad();
        if (grad.defined()) visit(groups_[g], g, i, p, grad.contiguous());
      }
    }
  }

  std::vector<ParamGroup> groups_;
};

// Scales all gradients so that their joint L2 norm is at most max_norm. Returns the norm before clipping.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace minidet::nn
