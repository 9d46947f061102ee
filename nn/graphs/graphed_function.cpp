#include "nn/graphs/graphed_function.h"

#include <utility>

#include "autograd/anomaly.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/trace.h"
#include "core/cuda/graph.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "core/grad_mode.h"
#include "core/storage.h"

namespace minidet::nn {

struct GraphedFunction::Captured {
  // Declared first, destroyed last: the tensors below free their blocks into the pool before it goes.
  std::shared_ptr<cuda::GraphPool> pool;
  std::vector<Tensor> static_inputs;        // x̂: leaves that require grad where the call's inputs did
  std::vector<Tensor> static_outputs;       // ŷ, with the autograd graph of f behind them
  std::vector<Tensor> static_grad_outputs;  // ĝ, one per output (filled before each backward replay)
  std::vector<size_t> differentiable;       // the outputs that require grad: G_bwd's roots
  std::vector<Tensor> parameters;           // θ: the module's parameters that require grad
  std::vector<Tensor> static_grads;         // G_bwd's results: per input (undefined if none), then per θ
  std::unique_ptr<cuda::CudaGraph> forward, backward;
  std::weak_ptr<autograd::Node> last_node;  // the node recorded by the last replay
  bool backward_pending = false;            // that node's backward has not run yet
};

namespace {

// A tensor over `fixed`'s memory whose storage is its own (and keeps `fixed`'s alive): what AccumulateGrad
// takes as .grad without a copy when the parameter has none. Non-contiguous buffers are passed as views.
Tensor adopt(const Tensor& fixed) {
  if (!fixed.defined() || !fixed.is_contiguous()) return fixed.defined() ? fixed.detach() : fixed;
  const size_t nbytes = static_cast<size_t>(fixed.numel()) * element_size(fixed.dtype());
  auto storage = std::make_shared<StorageImpl>(fixed.raw_data(), nbytes, fixed.device(),
                                               std::shared_ptr<const void>(fixed.storage()));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), fixed.sizes(), fixed.strides(), 0, fixed.dtype()));
}

}  // namespace

GraphedFunction::GraphedFunction(std::string name, std::vector<std::shared_ptr<Module>> modules, Function function,
                                 int warmup_calls)
    : name_(std::move(name)), modules_(std::move(modules)), function_(std::move(function)), warmup_calls_(warmup_calls) {
  MINIDET_CHECK(function_, "GraphedFunction '", name_, "': expected a function");
  for (const auto& module : modules_)
    MINIDET_CHECK(module != nullptr, "GraphedFunction '", name_, "': a module is null");
  MINIDET_CHECK(warmup_calls_ >= 1, "GraphedFunction '", name_, "': expected at least 1 warm-up call, got ",
                warmup_calls_);
}

GraphedFunction::~GraphedFunction() = default;

void GraphedFunction::reset() {
  for (Slot& slot : slots_) slot = Slot();
}

double GraphedFunction::replay_gpu_ms(int rounds) {
  const std::shared_ptr<Captured>& c = slots_[kTraining].captured;
  if (!c) return 0.0;
  std::vector<cuda::CudaGraph*> graphs{c->forward.get()};
  if (c->backward) graphs.push_back(c->backward.get());
  return cuda::time_replays_ms(graphs, rounds);
}

bool GraphedFunction::applicable(const std::vector<Tensor>& inputs) const {
  if (inputs.empty() || autograd::AnomalyMode::is_enabled() || autograd::BackwardTrace::stream() != nullptr)
    return false;
  for (const Tensor& x : inputs)
    if (!x.defined() || !x.is_cuda() || x.device() != inputs[0].device()) return false;
  // A backward still to come reads the last training replay's buffers, which a new one would overwrite.
  const std::shared_ptr<Captured>& c = slots_[kTraining].captured;
  return !GradMode::is_enabled() || !(c && c->backward_pending && !c->last_node.expired());
}

// Every call compares this key with the last one's, so it is plain numbers (no text): sizes, dtype, device and
// flags of each input, the deterministic mode, and each module's mode and its tensors' addresses.
std::vector<int64_t> GraphedFunction::signature(const std::vector<Tensor>& inputs) const {
  std::vector<int64_t> key;
  for (const Tensor& x : inputs) {
    key.push_back(x.dim());
    key.insert(key.end(), x.sizes().begin(), x.sizes().end());
    key.push_back(static_cast<int64_t>(x.dtype()));
    key.push_back(x.is_cuda() ? x.device().index : -1);
    key.push_back(x.requires_grad());
  }
  key.push_back(DeterministicMode::is_enabled());  // ops pick their kernels by it
  for (const auto& module : modules_) {
    key.push_back(module->is_training());
    const std::vector<Tensor> parameters = module->parameters(), buffers = module->buffers();
    key.push_back(static_cast<int64_t>(parameters.size()));
    for (const Tensor& p : parameters) {
      key.push_back(reinterpret_cast<intptr_t>(p.raw_data()));
      key.push_back(p.requires_grad());
    }
    key.push_back(static_cast<int64_t>(buffers.size()));
    for (const Tensor& b : buffers) key.push_back(reinterpret_cast<intptr_t>(b.raw_data()));
  }
  return key;
}

std::vector<Tensor> GraphedFunction::parameters() const {
  std::vector<Tensor> all;
  for (const auto& module : modules_)
    for (const Tensor& p : module->parameters())
      if (p.requires_grad()) all.push_back(p);
  return all;
}

std::vector<Tensor> GraphedFunction::operator()(const std::vector<Tensor>& inputs) {
  if (!applicable(inputs)) {
    counts_.eager++;
    return function_(inputs);
  }
  Slot& slot = slots_[GradMode::is_enabled() ? kTraining : kInference];
  std::vector<int64_t> key = signature(inputs);
  if (key != slot.signature) {  // first call, or something a graph depends on changed: warm up again
    slot = Slot();
    slot.signature = std::move(key);
  }
  if (!slot.captured) {
    if (slot.warm_calls < warmup_calls_) {
      slot.warm_calls++;
      counts_.eager++;
      return function_(inputs);
    }
    slot.captured = capture(inputs);
    counts_.captures++;
  }
  return replay(slot.captured, inputs);
}

std::shared_ptr<GraphedFunction::Captured> GraphedFunction::capture(const std::vector<Tensor>& inputs) {
  auto c = std::make_shared<Captured>();
  c->pool = std::make_shared<cuda::GraphPool>(inputs[0].device().index);
  const bool training = GradMode::is_enabled();
  std::vector<Tensor> targets;  // what G_bwd differentiates for: inputs that require grad, then θ
  for (const Tensor& x : inputs) {
    Tensor fixed = x.detach().clone();
    if (training && x.requires_grad()) fixed.requires_grad_(true);
    c->static_inputs.push_back(fixed);
  }
  c->forward = std::make_unique<cuda::CudaGraph>(c->pool);
  c->forward->capture([&] { c->static_outputs = function_(c->static_inputs); });  // in the caller's grad mode
  if (!training) {  // inference: the forward graph is all there is
    for (size_t k = 0; k < c->static_outputs.size(); ++k)
      MINIDET_CHECK(c->static_outputs[k].defined() && c->static_outputs[k].device() == inputs[0].device(),
                    "GraphedFunction '", name_, "': output ", k, " is not a tensor on ", inputs[0].device());
    return c;
  }
  c->parameters = parameters();
  for (size_t k = 0; k < c->static_outputs.size(); ++k) {
    const Tensor& y = c->static_outputs[k];
    MINIDET_CHECK(y.defined() && y.device() == inputs[0].device(), "GraphedFunction '", name_, "': output ", k,
                  " is not a tensor on ", inputs[0].device());
    c->static_grad_outputs.push_back(zeros_like(y));
    if (y.requires_grad()) c->differentiable.push_back(k);
  }

  std::vector<size_t> input_slots;  // per input: its index in `targets`, or npos
  for (const Tensor& x : c->static_inputs) {
    input_slots.push_back(x.requires_grad() ? targets.size() : std::string::npos);
    if (x.requires_grad()) targets.push_back(x);
  }
  for (const Tensor& p : c->parameters) targets.push_back(p);
  if (!c->differentiable.empty() && !targets.empty()) {
    std::vector<Tensor> roots, root_grads;
    for (size_t k : c->differentiable) {
      roots.push_back(c->static_outputs[k]);
      root_grads.push_back(c->static_grad_outputs[k]);
    }
    c->backward = std::make_unique<cuda::CudaGraph>(c->pool);
    std::vector<Tensor> grads;
    c->backward->capture([&] { grads = autograd::grad(roots, targets, root_grads, /*retain_graph=*/true); });
    for (size_t i = 0; i < inputs.size(); ++i)
      c->static_grads.push_back(input_slots[i] == std::string::npos ? Tensor() : grads[input_slots[i]]);
    // Parameters f does not reach get no gradient and no edge: their .grad stays as it is, as in eager code.
    const size_t first_parameter = targets.size() - c->parameters.size();
    std::vector<Tensor> reached;
    for (size_t j = 0; j < c->parameters.size(); ++j) {
      if (!grads[first_parameter + j].defined()) continue;
      reached.push_back(c->parameters[j]);
      c->static_grads.push_back(grads[first_parameter + j]);
    }
    c->parameters = std::move(reached);
  }
  return c;
}

std::vector<Tensor> GraphedFunction::replay(const std::shared_ptr<Captured>& captured,
                                            const std::vector<Tensor>& inputs) {
  Captured& c = *captured;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].raw_data() != c.static_inputs[i].raw_data()) c.static_inputs[i].detach().copy_(inputs[i].detach());
  c.forward->replay();
  counts_.replays++;
  std::vector<Tensor> outputs;
  for (const Tensor& y : c.static_outputs) outputs.push_back(y.detach());
  if (!c.backward) return outputs;

  std::vector<Tensor> recorded = inputs;  // the node's inputs: the call's, then θ
  recorded.insert(recorded.end(), c.parameters.begin(), c.parameters.end());
  std::vector<Tensor> differentiable_outputs;
  for (size_t k : c.differentiable) differentiable_outputs.push_back(outputs[k]);
  const size_t n_inputs = inputs.size();
  autograd::record(name_, recorded, differentiable_outputs, /*saved=*/{},
                   [state = captured, n_inputs](autograd::BackwardContext& ctx, const autograd::TensorList& grads) {
                     Captured& s = *state;
                     for (size_t k = 0; k < grads.size(); ++k)
                       s.static_grad_outputs[s.differentiable[k]].copy_(grads[k]);
                     // A .grad that is the fixed buffer (kept from the last step) must not be overwritten.
                     for (size_t j = 0; j < s.parameters.size(); ++j) {
                       const Tensor g = s.parameters[j].grad(), fixed = s.static_grads[n_inputs + j];
                       if (g.defined() && fixed.defined() && g.raw_data() == fixed.raw_data())
                         s.parameters[j].set_grad(g.clone());
                     }
                     s.backward->replay();
                     s.backward_pending = false;
                     autograd::TensorList result(n_inputs + s.parameters.size());
                     for (size_t i = 0; i < n_inputs; ++i)
                       if (ctx.needs_input_grad(i) && s.static_grads[i].defined())
                         result[i] = s.static_grads[i].detach();
                     for (size_t j = 0; j < s.parameters.size(); ++j)
                       result[n_inputs + j] = adopt(s.static_grads[n_inputs + j]);
                     return result;
                   });
  if (!differentiable_outputs.empty() && differentiable_outputs[0].grad_fn()) {
    c.last_node = differentiable_outputs[0].grad_fn();
    c.backward_pending = true;
  }
  return outputs;
}

}  // namespace minidet::nn
