// Checkpoint entries and the training state they carry.
#include "nn/checkpoint/checkpoint.h"

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
    for (size_t g = 0; g < optimizer->param_groups().size(); ++g)
      c.put("optim.lr." + std::to_string(g), from_vector<double>({optimizer->param_groups()[g].lr}));
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
}  // namespace

TrainingProgress restore_training_state(const Checkpoint& c, Module& model, Optimizer* optimizer,
                                        LRScheduler* scheduler, Generator* generator) {
  // 1. Check everything the model needs, without changing anything.
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
  if (scheduler) c.get("sched.step");
  if (generator) MINIDET_CHECK(c.get("rng.state").numel() == 6, "checkpoint: rng.state must hold 6 words");
  const Tensor& step = c.get("progress.step");
  const Tensor& epoch = c.get("progress.epoch");

  // 2. The optimizer validates its entries itself before changing anything.
  if (optimizer) {
    NamedTensors state;
    for (const auto& [name, t] : c.entries)
      if (starts_with(name, "optim.") && !starts_with(name, "optim.lr.")) state.emplace_back(name.substr(6), t);
    for (size_t g = 0; g < optimizer->param_groups().size(); ++g) c.get("optim.lr." + std::to_string(g));
    optimizer->load_state(state);
    for (size_t g = 0; g < optimizer->param_groups().size(); ++g)
      optimizer->param_groups()[g].lr = c.get("optim.lr." + std::to_string(g)).item<double>();
  }

  // 3. Everything checked: apply.
  {
    NoGradGuard no_grad;
    for (const auto& [name, t] : targets) t.copy_(c.get("model." + name));
  }
  if (scheduler) scheduler->set_step(c.get("sched.step").item<int64_t>());
  if (generator) {
    const std::vector<int64_t> words = c.get("rng.state").to_vector<int64_t>();
    generator->set_state(std::vector<uint64_t>(words.begin(), words.end()));
  }
  return {step.item<int64_t>(), epoch.item<int64_t>()};
}

}  // namespace minidet::nn
