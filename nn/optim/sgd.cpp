#include "nn/optim/sgd.h"

#include <cmath>

#include "core/factories.h"
#include "nn/optim/optim_kernels.h"

namespace minidet::nn {

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options) : Optimizer(std::move(groups)), options_(options) {
  // Comparisons that NaN fails, so a NaN option is refused too.
  MINIDET_CHECK(std::isfinite(options_.momentum) && options_.momentum >= 0,
                "SGD: momentum must be a finite number >= 0, got ", options_.momentum);
  MINIDET_CHECK(options_.dampening >= 0 && options_.dampening <= 1, "SGD: dampening must lie in [0, 1], got ",
                options_.dampening);
  MINIDET_CHECK(!options_.nesterov || (options_.momentum > 0 && options_.dampening == 0),
                "SGD: nesterov needs momentum > 0 and dampening 0");
  for (const ParamGroup& group : groups_) momentum_buffers_.emplace_back(group.params.size());
}

void SGD::step() {
  for_each_param_with_grad([&](const ParamGroup& group, size_t g, size_t i, const Tensor& p, const Tensor& grad) {
    Tensor& buf = momentum_buffers_[g][i];
    follow_param(buf, p);
    const bool first = options_.momentum != 0 && !buf.defined();
    if (first) buf = empty(p.sizes(), p.options());
    detail::sgd_update(p, grad, buf,
                       {group.lr, options_.momentum, options_.dampening, group.weight_decay, options_.nesterov, first});
  });
}

NamedTensors SGD::state() const {
  NamedTensors out;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i)
      if (momentum_buffers_[g][i].defined())
        out.emplace_back("group" + std::to_string(g) + ".param" + std::to_string(i) + ".momentum_buffer",
                         momentum_buffers_[g][i]);
  return out;
}

void SGD::load_state(const NamedTensors& state) {
  std::vector<StateKey> keys;
  for (const auto& [name, value] : state) {
    keys.push_back(parse_state_name(name, value, /*like_param=*/true));
    MINIDET_CHECK(keys.back().what == "momentum_buffer", "SGD state: unknown entry '", name, "'");
  }
  for (auto& group : momentum_buffers_)
    for (Tensor& buf : group) buf = Tensor();
  for (size_t k = 0; k < keys.size(); ++k) {
    const Tensor& p = groups_[keys[k].group].params[keys[k].param];
    momentum_buffers_[keys[k].group][keys[k].param] = state[k].second.to(p.options()).clone();
  }
}

}  // namespace minidet::nn
