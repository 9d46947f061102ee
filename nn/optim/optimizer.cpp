#include "nn/optim/optimizer.h"

#include <cmath>
#include <unordered_set>

#include "autograd/engine.h"
#include "core/accumulate.h"
#include "core/reduce_sum.h"
#include "ops/elementwise/binary.h"

namespace minidet::nn {

Optimizer::Optimizer(std::vector<ParamGroup> groups) : groups_(std::move(groups)) {
  MINIDET_CHECK(!groups_.empty(), "optimizer: no parameter groups");
  std::unordered_set<const TensorImpl*> seen;
  for (size_t g = 0; g < groups_.size(); ++g) {
    // Written as "not (x >= 0)" style comparisons that NaN fails, so a NaN lr is refused too.
    MINIDET_CHECK(std::isfinite(groups_[g].lr) && groups_[g].lr >= 0, "optimizer: group ", g,
                  " needs a finite lr >= 0, got ", groups_[g].lr);
    MINIDET_CHECK(std::isfinite(groups_[g].weight_decay) && groups_[g].weight_decay >= 0, "optimizer: group ", g,
                  " needs a finite weight_decay >= 0, got ", groups_[g].weight_decay);
    // Usually a model with nothing trainable (all frozen) or a filter that matched nothing: a silent no-op.
    MINIDET_CHECK(!groups_[g].params.empty(), "optimizer: group ", g, " has no parameters");
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const Tensor& p = groups_[g].params[i];
      MINIDET_CHECK(p.defined(), "optimizer: group ", g, " parameter ", i, " is undefined");
      MINIDET_CHECK(p.requires_grad() && p.is_leaf(), "optimizer: group ", g, " parameter ", i,
                    " is not a leaf tensor that requires grad");
      MINIDET_CHECK(p.is_contiguous(), "optimizer: group ", g, " parameter ", i, " is not contiguous");
      MINIDET_CHECK(seen.insert(p.impl()).second, "optimizer: group ", g, " parameter ", i,
                    " appears more than once; it would be updated twice per step");
    }
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (ParamGroup& group : groups_)
    for (const Tensor& p : group.params) autograd::zero_grad(p, set_to_none);
}

Optimizer::StateKey Optimizer::parse_state_name(const std::string& name, const Tensor& value, bool like_param) const {
  StateKey key{};
  size_t consumed = 0;
  const bool shaped = name.rfind("group", 0) == 0 &&
                      std::sscanf(name.c_str(), "group%zu.param%zu.%zn", &key.group, &key.param, &consumed) == 2;
  MINIDET_CHECK(shaped && consumed > 0, "optimizer state: bad entry name '", name,
                "' (expected group<g>.param<i>.<what>)");
  key.what = name.substr(consumed);
  // sscanf also reads "group01" as group 1: accept only the canonical spelling, so two names can never
  // address one slot.
  MINIDET_CHECK(name == "group" + std::to_string(key.group) + ".param" + std::to_string(key.param) + "." + key.what,
                "optimizer state: entry name '", name, "' is not in canonical form");
  MINIDET_CHECK(key.group < groups_.size() && key.param < groups_[key.group].params.size(),
                "optimizer state: '", name, "' names a parameter this optimizer does not have");
  if (like_param) {
    const Tensor& p = groups_[key.group].params[key.param];
    MINIDET_CHECK(value.sizes() == p.sizes() && value.dtype() == p.dtype(), "optimizer state: '", name,
                  "' has shape ", value.sizes(), " ", value.dtype(), " but the parameter is ", p.sizes(), " ",
                  p.dtype());
  }
  return key;
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  // A negative bound would flip every gradient's sign; NaN would turn them all into NaN.
  MINIDET_CHECK(max_norm >= 0, "clip_grad_norm_: max_norm must be >= 0, got ", max_norm);
  NoGradGuard no_grad;
  // Sum the squares on the gradients' device and read the total once: one host sync, not one per param.
  Tensor total_sq;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor part = sum_dims_raw(g * g, {}, false);
    if (!total_sq.defined()) total_sq = part.to(kFloat64);
    else add_into(total_sq, part.to(TensorOptions(kFloat64, total_sq.device())));
  }
  if (!total_sq.defined()) return 0.0;
  const double total = std::sqrt(total_sq.item<double>());
  const double scale = max_norm / (total + 1e-6);
  if (scale < 1.0) {
    for (const Tensor& p : params)
      if (const Tensor g = p.grad(); g.defined()) g.copy_(g * scale);
  }
  return total;
}

}  // namespace minidet::nn
