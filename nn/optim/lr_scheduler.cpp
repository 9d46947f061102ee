#include "nn/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>

namespace minidet::nn {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  // The base is each group's initial_lr, recorded by the first scheduler: a scheduler made after restoring a
  // checkpoint (whose lr is already decayed) must not decay it a second time.
  for (ParamGroup& group : optimizer.param_groups()) {
    if (group.initial_lr < 0) group.initial_lr = group.lr;
    base_lrs_.push_back(group.initial_lr);
  }
}

void LRScheduler::apply() {
  const double f = factor(step_);
  auto& groups = optimizer_.param_groups();
  MINIDET_CHECK(groups.size() == base_lrs_.size(), "LRScheduler: the optimizer now has ", groups.size(),
                " parameter groups but the scheduler was made for ", base_lrs_.size());
  for (size_t g = 0; g < groups.size(); ++g) groups[g].lr = base_lrs_[g] * f;
}

void LRScheduler::step() {
  ++step_;
  apply();
}

void LRScheduler::set_step(int64_t step) {
  MINIDET_CHECK(step >= 0, "LRScheduler::set_step: negative step ", step);
  step_ = step;
  apply();
}

double linear_warmup(int64_t step, int64_t warmup_iters, double warmup_factor) {
  if (step >= warmup_iters) return 1.0;
  const double alpha = static_cast<double>(step) / static_cast<double>(warmup_iters);
  return warmup_factor * (1.0 - alpha) + alpha;
}

WarmupMultiStepLR::WarmupMultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma,
                                     int64_t warmup_iters, double warmup_factor)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma), warmup_iters_(warmup_iters),
      warmup_factor_(warmup_factor) {
  MINIDET_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()), "WarmupMultiStepLR: milestones must be "
                "increasing");
  MINIDET_CHECK(warmup_iters_ >= 0, "WarmupMultiStepLR: negative warmup_iters");
  // Comparisons that NaN fails: a NaN factor would make every later lr NaN without a word.
  MINIDET_CHECK(gamma_ > 0 && std::isfinite(gamma_), "WarmupMultiStepLR: gamma must be a finite number > 0, got ",
                gamma_);
  MINIDET_CHECK(warmup_factor_ >= 0 && warmup_factor_ <= 1, "WarmupMultiStepLR: warmup_factor must lie in [0, 1], got ",
                warmup_factor_);
  apply();
}

double WarmupMultiStepLR::factor(int64_t step) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), step) - milestones_.begin();
  return linear_warmup(step, warmup_iters_, warmup_factor_) * std::pow(gamma_, static_cast<double>(passed));
}

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, int64_t total_iters, double min_factor, int64_t warmup_iters,
                               double warmup_factor)
    : LRScheduler(optimizer), total_iters_(total_iters), min_factor_(min_factor), warmup_iters_(warmup_iters),
      warmup_factor_(warmup_factor) {
  MINIDET_CHECK(total_iters_ > 0, "WarmupCosineLR: total_iters must be positive");
  MINIDET_CHECK(warmup_iters_ >= 0, "WarmupCosineLR: negative warmup_iters");
  MINIDET_CHECK(min_factor_ >= 0 && min_factor_ <= 1, "WarmupCosineLR: min_factor must lie in [0, 1], got ",
                min_factor_);
  MINIDET_CHECK(warmup_factor_ >= 0 && warmup_factor_ <= 1, "WarmupCosineLR: warmup_factor must lie in [0, 1], got ",
                warmup_factor_);
  apply();
}

double WarmupCosineLR::factor(int64_t step) const {
  const double progress = std::min<double>(static_cast<double>(step) / static_cast<double>(total_iters_), 1.0);
  const double cosine = min_factor_ + (1.0 - min_factor_) * 0.5 * (1.0 + std::cos(M_PI * progress));
  return linear_warmup(step, warmup_iters_, warmup_factor_) * cosine;
}

}  // namespace minidet::nn
