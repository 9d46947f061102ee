#include "nn/optim/adam.h"

#include <cmath>
#include <map>
#include <set>

#include "core/factories.h"
#include "nn/optim/optim_kernels.h"

namespace minidet::nn {

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Optimizer(std::move(groups)), options_(options) {
  MINIDET_CHECK(options_.beta1 >= 0 && options_.beta1 < 1 && options_.beta2 >= 0 && options_.beta2 < 1,
                "Adam: betas must lie in [0, 1), got ", options_.beta1, " and ", options_.beta2);
  MINIDET_CHECK(std::isfinite(options_.eps) && options_.eps >= 0, "Adam: eps must be a finite number >= 0, got ",
                options_.eps);
  for (const ParamGroup& group : groups_) state_.emplace_back(group.params.size());
}

void Adam::step() {
  // Consecutive parameters that take the same step (same group settings and step count: usually all of them)
  // are updated together, which on the GPU is one launch for up to 48 of them (adam_update_many).
  std::vector<detail::AdamTensors> run;
  detail::AdamStep run_step{};
  const auto same = [](const detail::AdamStep& a, const detail::AdamStep& b) {
    return a.lr == b.lr && a.weight_decay == b.weight_decay && a.bias_correction1 == b.bias_correction1 &&
           a.bias_correction2 == b.bias_correction2;  // the rest comes from options_, the same for all
  };
  for_each_param_with_grad([&](const ParamGroup& group, size_t g, size_t i, const Tensor& p, const Tensor& grad) {
    ParamState& s = state_[g][i];
    follow_param(s.exp_avg, p);
    follow_param(s.exp_avg_sq, p);
    if (!s.exp_avg.defined()) {
      s.exp_avg = zeros(p.sizes(), p.options());
      s.exp_avg_sq = zeros(p.sizes(), p.options());
    }
    ++s.step;
    const double t = static_cast<double>(s.step);
    const detail::AdamStep step{group.lr, options_.beta1, options_.beta2, options_.eps, group.weight_decay,
                                options_.decoupled_weight_decay, 1 - std::pow(options_.beta1, t),
                                1 - std::pow(options_.beta2, t)};
    if (!run.empty() && !same(step, run_step)) {
      detail::adam_update_many(run, run_step);
      run.clear();
    }
    run_step = step;
    run.push_back({p, grad, s.exp_avg, s.exp_avg_sq});
  });
  if (!run.empty()) detail::adam_update_many(run, run_step);
}

NamedTensors Adam::state() const {
  NamedTensors out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const ParamState& s = state_[g][i];
      if (!s.exp_avg.defined()) continue;
      const std::string prefix = "group" + std::to_string(g) + ".param" + std::to_string(i) + ".";
      out.emplace_back(prefix + "step", from_vector<int64_t>({s.step}));
      out.emplace_back(prefix + "exp_avg", s.exp_avg);
      out.emplace_back(prefix + "exp_avg_sq", s.exp_avg_sq);
    }
  }
  return out;
}

void Adam::load_state(const NamedTensors& state) {
  // Validate every entry before touching anything.
  std::vector<StateKey> keys;
  for (const auto& [name, value] : state) {
    const bool is_step = name.size() >= 5 && name.compare(name.size() - 5, 5, ".step") == 0;
    keys.push_back(parse_state_name(name, value, /*like_param=*/!is_step));
    const std::string& what = keys.back().what;
    MINIDET_CHECK(what == "step" || what == "exp_avg" || what == "exp_avg_sq", "Adam state: unknown entry '",
                  name, "'");
    if (is_step)
      MINIDET_CHECK(value.dtype() == kInt64 && value.numel() == 1, "Adam state: '", name,
                    "' must be one int64");
  }
  // Each parameter that has state must have exactly its three entries, and a step count of at least 1 (the
  // state exists only after a step; t = 0 would divide by a zero bias correction).
  std::map<std::pair<size_t, size_t>, std::set<std::string>> entries;
  for (size_t k = 0; k < keys.size(); ++k) {
    entries[{keys[k].group, keys[k].param}].insert(keys[k].what);
    if (keys[k].what == "step")
      MINIDET_CHECK(state[k].second.item<int64_t>() >= 1, "Adam state: '", state[k].first, "' must be >= 1");
  }
  for (const auto& [param, whats] : entries)
    MINIDET_CHECK(whats == std::set<std::string>({"exp_avg", "exp_avg_sq", "step"}), "Adam state: group",
                  param.first, ".param", param.second, " needs exactly step, exp_avg and exp_avg_sq");
  for (auto& group : state_)
    for (ParamState& s : group) s = ParamState();
  for (size_t k = 0; k < keys.size(); ++k) {
    ParamState& s = state_[keys[k].group][keys[k].param];
    const Tensor& p = groups_[keys[k].group].params[keys[k].param];
    const Tensor& value = state[k].second;
    if (keys[k].what == "step") s.step = value.item<int64_t>();
    else if (keys[k].what == "exp_avg") s.exp_avg = value.to(p.options()).clone();
    else s.exp_avg_sq = value.to(p.options()).clone();
  }
}

}  // namespace minidet::nn
