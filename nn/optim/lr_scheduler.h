// Learning-rate schedules: lr(step) = base_lr of each group * factor(step).
//
// Both start with a linear warm-up (Goyal et al. 2017); the cosine decay is SGDR's (Loshchilov & Hutter 2017)
// without restarts.
//
//   WarmupMultiStepLR (the detectron2 schedule for Faster R-CNN):
//     factor = warmup(step) * gamma ^ (number of milestones <= step)
//     warmup(step) = warmup_factor * (1 - a) + a,  a = step / warmup_iters, for step < warmup_iters; else 1
//   WarmupCosineLR:
//     factor = warmup(step) * (min_factor + (1 - min_factor) * (1 + cos(pi * step / total_iters)) / 2)
//
// Call step() once per iteration after optimizer.step(); it advances the counter and sets every group's lr.
// The constructor applies factor(0) at once, so the first iteration already uses the warm-up lr.
#pragma once

#include <vector>

#include "nn/optim/optimizer.h"

namespace minidet::nn {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  virtual double factor(int64_t step) const = 0;

  void step();                 // advance one iteration and apply
  void set_step(int64_t step);  // jump (after loading a checkpoint) and apply
  int64_t last_step() const { return step_; }
  double lr(size_t group = 0) const { return optimizer_.param_groups().at(group).lr; }

 protected:
  void apply();

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t step_ = 0;
};

double linear_warmup(int64_t step, int64_t warmup_iters, double warmup_factor);

class WarmupMultiStepLR final : public LRScheduler {
 public:
  WarmupMultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1,
                    int64_t warmup_iters = 0, double warmup_factor = 0.001);
  double factor(int64_t step) const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
  int64_t warmup_iters_;
  double warmup_factor_;
};

class WarmupCosineLR final : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, int64_t total_iters, double min_factor = 0.0, int64_t warmup_iters = 0,
                 double warmup_factor = 0.001);
  double factor(int64_t step) const override;

 private:
  int64_t total_iters_;
  double min_factor_;
  int64_t warmup_iters_;
  double warmup_factor_;
};

}  // namespace minidet::nn
