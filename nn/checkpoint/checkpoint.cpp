// Checkpoint entries and the training state they carry.
#include "nn/checkpoint/checkpoint.h"

#include <cmath>
#include <set>

#include "core/factories.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/optimizer.h"

namespace minidet::nn {

void Checkpoint::put(const std::string& name, const Tensor& tensor) {
  MINIDET_CHECK(!has(name), "Checkpoint::put: entry '", name, "' already exists");
  entries.emplace_back(name, tensor);
}

bool Checkpoint::has(const std::string& name) const {
  for (const auto& entry : entries)
    if (entry.first == name) return true;
  return false;
}

const Tensor& Checkpoint::get(const std::string& name) const {
  for (const auto& entry : entries)
    if (entry.first == name) return entry.second;
  MINIDET_FAIL("checkpoint: no entry named '", name, "'");
}

// Entry names: "model.<dotted parameter or buffer name>", "optim.<state name>", "optim.lr.<group>",
// "sched.step", "rng.state", "progress.step", "progress.epoch".
Checkpoint capture_training_state(const Module& model, const Optimizer* optimizer, const LRScheduler* scheduler,
                                  const Generator* generator, TrainingProgress progress) {
  Checkpoint c;
  for (const auto& [name, t] : model.named_parameters()) c.put("model." + name, t);
  for (const auto& [name, t] : model.named_buffers()) c.put("model." + name, t);
  if (optimizer) {
    for (const auto& [name, t] : optimizer->state()) c.put("optim." + name, t);
    for (size_t g = 0; g < optimizer->param_groups().size(); ++g) {
      c.put("optim.lr." + std::to_string(g), from_vector<double>({optimizer->param_groups()[g].lr}));
      c.put("optim.initial_lr." + std::to_string(g), from_vector<double>({optimizer->param_groups()[g].initial_lr}));
    }
  }
  if (scheduler) c.put("sched.step", from_vector<int64_t>({scheduler->last_step()}));
  if (generator) {
    const std::vector<uint64_t> words = generator->state();
    c.put("rng.state", from_vector<int64_t>(std::vector<int64_t>(words.begin(), words.end())));
  }
  c.put("progress.step", from_vector<int64_t>({progress.step}));
  c.put("progress.epoch", from_vector<int64_t>({progress.epoch}));
  return c;
}

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// A one-element scalar entry of the expected dtype, checked before anything is restored.
const Tensor& scalar_entry(const Checkpoint& c, const std::string& name, DType dtype) {
  const Tensor& t = c.get(name);
  MINIDET_CHECK(t.numel() == 1 && t.dtype() == dtype, "checkpoint: '", name, "' must be one ", dtype, ", got ",
                t.sizes(), " ", t.dtype());
  return t;
}

}  // namespace

TrainingProgress restore_training_state(const Checkpoint& c, Module& model, Optimizer* optimizer,
                                        LRScheduler* scheduler, Generator* generator) {
  // 1. Check everything, changing nothing: model entries, every scalar, the generator state.
  NamedTensors targets = model.named_parameters();
  for (auto& entry : model.named_buffers()) targets.push_back(entry);
  std::set<std::string> expected;
  for (const auto& [name, t] : targets) {
    expected.insert("model." + name);
    const Tensor& saved = c.get("model." + name);
    MINIDET_CHECK(saved.sizes() == t.sizes() && saved.dtype() == t.dtype(), "checkpoint: 'model.", name,
                  "' is ", saved.sizes(), " ", saved.dtype(), " in the file but ", t.sizes(), " ", t.dtype(),
                  " in the model");
  }
  for (const auto& [name, t] : c.entries)
    MINIDET_CHECK(!starts_with(name, "model.") || expected.count(name), "checkpoint: entry '", name,
                  "' matches nothing in the model");
  const int64_t step = scalar_entry(c, "progress.step", kInt64).item<int64_t>();
  const int64_t epoch = scalar_entry(c, "progress.epoch", kInt64).item<int64_t>();
  MINIDET_CHECK(step >= 0, "checkpoint: progress.step is negative (", step, ")");
  MINIDET_CHECK(epoch >= 0, "checkpoint: progress.epoch is negative (", epoch, ")");
  int64_t scheduler_step = 0;
  if (scheduler) {
    scheduler_step = scalar_entry(c, "sched.step", kInt64).item<int64_t>();
    MINIDET_CHECK(scheduler_step >= 0, "checkpoint: sched.step is negative (", scheduler_step, ")");
  }
  std::vector<int64_t> rng_words;
  if (generator) {
    const Tensor& words = c.get("rng.state");
    MINIDET_CHECK(words.numel() == 6 && words.dtype() == kInt64, "checkpoint: rng.state must be 6 int64 words");
    rng_words = words.to_vector<int64_t>();
  }
  std::vector<double> lrs, initial_lrs;
  NamedTensors optimizer_state;
  if (optimizer) {
    for (size_t g = 0; g < optimizer->param_groups().size(); ++g) {
      const std::string lr = "optim.lr." + std::to_string(g), initial_lr = "optim.initial_lr." + std::to_string(g);
      lrs.push_back(scalar_entry(c, lr, kFloat64).item<double>());
      initial_lrs.push_back(scalar_entry(c, initial_lr, kFloat64).item<double>());
      // What the Optimizer's constructor demands of a rate. A negative initial_lr means "no scheduler ran yet"
      // (ParamGroup), so only its finiteness is checked.
      MINIDET_CHECK(std::isfinite(lrs.back()) && lrs.back() >= 0, "checkpoint: ", lr,
                    " is not a finite learning rate >= 0 (", lrs.back(), ")");
      MINIDET_CHECK(std::isfinite(initial_lrs.back()), "checkpoint: ", initial_lr, " is not finite (",
                    initial_lrs.back(), ")");
    }
    for (const auto& [name, t] : c.entries)
      if (starts_with(name, "optim.") && !starts_with(name, "optim.lr.") && !starts_with(name, "optim.initial_lr."))
        optimizer_state.emplace_back(name.substr(6), t);
  }

  // 2. The optimizer checks its own entries and applies them only if all are valid; it is the last step
  //    that can fail, so a failure here still leaves everything unchanged.
  if (optimizer) optimizer->load_state(optimizer_state);

  // 3. Apply the rest: nothing below can fail on a checkpoint that passed the checks above.
  if (optimizer) {
    for (size_t g = 0; g < lrs.size(); ++g) {
      optimizer->param_groups()[g].lr = lrs[g];
      optimizer->param_groups()[g].initial_lr = initial_lrs[g];
    }
  }
  {
    NoGradGuard no_grad;
    for (const auto& [name, t] : targets) t.copy_(c.get("model." + name));
  }
  if (scheduler) scheduler->set_step(scheduler_step);
  if (generator) generator->set_state(std::vector<uint64_t>(rng_words.begin(), rng_words.end()));
  return {step, epoch};
}

}  // namespace minidet::nn
