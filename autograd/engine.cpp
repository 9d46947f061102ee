#include "autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/anomaly.h"
#include "autograd/backward_record.h"
#include "autograd/function.h"
#include "autograd/trace.h"
#include "core/accumulate.h"
#include "core/factories.h"
#include "core/reduce_sum.h"

namespace minidet::autograd {
namespace {

// The gradients waiting for one node, one slot per forward output. A slot first holds the tensor that
// arrived (possibly shared with another node's buffer); it is copied only when a second one must be added.
struct InputBuffer {
  TensorList grads;
  std::vector<bool> owned;

  explicit InputBuffer(size_t slots) : grads(slots), owned(slots, false) {}
  void add(size_t slot, const Tensor& grad) {
    if (!grads[slot].defined()) {
      grads[slot] = grad;
      return;
    }
    if (!owned[slot]) {
      grads[slot] = grads[slot].clone();
      owned[slot] = true;
    }
    add_into(grads[slot], grad);
  }
};

struct ReadyOrder {  // later-created nodes first: the reverse of the forward order
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

std::unordered_map<Node*, int> count_dependencies(const std::vector<Node*>& roots) {
  std::unordered_map<Node*, int> dependencies;
  std::unordered_set<Node*> seen(roots.begin(), roots.end());
  std::vector<Node*> stack(seen.begin(), seen.end());
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& edge : node->next_edges) {
      if (!edge.valid()) continue;
      dependencies[edge.node.get()]++;
      if (seen.insert(edge.node.get()).second) stack.push_back(edge.node.get());
    }
  }
  return dependencies;
}

// Brings a gradient returned for input i to the input's shape, or explains why it cannot.
Tensor conform_to_input(const Node& node, size_t i, const Tensor& grad) {
  const TensorMeta& meta = node.input_meta[i];
  MINIDET_CHECK(grad.dtype() == meta.dtype && grad.device() == meta.device, "backward of '", node.name(),
                "' returned a gradient of dtype ", grad.dtype(), " on ", grad.device(), " for input ", i,
                ", which is ", meta.dtype, " on ", meta.device);
  if (grad.sizes() == meta.sizes) return grad;
  MINIDET_CHECK(broadcastable_to(meta.sizes, grad.sizes()), "backward of '", node.name(),
                "' returned a gradient of shape ", grad.sizes(), " for input ", i, " of shape ", meta.sizes,
                " (the shapes are not related by broadcasting)");
  return sum_to(grad, meta.sizes);
}

void check_anomaly(const Node& node, const TensorList& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    MINIDET_CHECK(!has_nan_or_inf(grads[i]), "anomaly: backward of '", node.name(), "' (node #",
                  node.sequence_nr(), ") produced NaN or Inf in the gradient of input ", i, " (shape ",
                  grads[i].sizes(), ").\nThe forward ",
                  node.creation_context.empty() ? "op was recorded before anomaly mode was enabled"
                                                : node.creation_context);
  }
}

// For grad(): which results a node's gradient slots fill (node -> (slot, result index)), and the results.
// Without targets the run is backward(): leaves' AccumulateGrad nodes write .grad.
struct GradTargets {
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> slots;
  TensorList results;
};

void run_backward(const TensorList& roots, const TensorList& grad_roots, bool retain_graph, GradTargets* targets);

}  // namespace

void backward(const TensorList& roots, const TensorList& grad_roots, bool retain_graph) {
  run_backward(roots, grad_roots, retain_graph, nullptr);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                bool retain_graph) {
  GradTargets targets;
  targets.results.resize(inputs.size());
  // Keeps the inputs' nodes alive for the run: a leaf's AccumulateGrad is otherwise held only weakly.
  std::vector<std::shared_ptr<Node>> owners;
  for (size_t i = 0; i < inputs.size(); ++i) {
    MINIDET_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "grad: input ", i,
                  " does not require grad, so it has no gradient");
    const Edge edge = gradient_edge(inputs[i]);
    owners.push_back(edge.node);
    targets.slots[edge.node.get()].push_back({edge.input_nr, i});
  }
  run_backward(outputs, grad_outputs, retain_graph, &targets);
  return std::move(targets.results);
}

namespace {

void run_backward(const TensorList& roots, const TensorList& grad_roots, bool retain_graph, GradTargets* targets) {
  MINIDET_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), "backward: got ", roots.size(),
                " roots but ", grad_roots.size(), " gradients");
  NoGradGuard no_grad;  // backward formulas compute gradients; they are not recorded themselves

  std::vector<Node*> root_nodes;
  // Owns the roots' nodes for the whole backward: a leaf root's AccumulateGrad is otherwise held only weakly.
  std::vector<std::shared_ptr<Node>> root_owners;
  std::unordered_map<Node*, InputBuffer> buffers;
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    MINIDET_CHECK(root.defined() && root.requires_grad(), "backward: root ", r,
                  " does not require grad and has no grad_fn (did every input have requires_grad false, "
                  "or was it computed under NoGradGuard?)");
    Tensor grad = grad_roots.empty() ? Tensor() : grad_roots[r];
    if (!grad.defined()) {
      MINIDET_CHECK(root.numel() == 1, "backward: a gradient can be implied only for a single-element root; "
                    "root ", r, " has shape ", root.sizes(), ", so pass its gradient explicitly");
      grad = ones_like(root);
    }
    MINIDET_CHECK(grad.sizes() == root.sizes() && grad.dtype() == root.dtype() && grad.device() == root.device(),
                  "backward: gradient ", grad.sizes(), " ", grad.dtype(), " on ", grad.device(),
                  " does not match root ", root.sizes(), " ", root.dtype(), " on ", root.device());
    const Edge edge = gradient_edge(root);
    root_owners.push_back(edge.node);
    auto [it, fresh] = buffers.try_emplace(edge.node.get(), edge.node->output_meta.size());
    it->second.add(edge.input_nr, grad);
    if (fresh) root_nodes.push_back(edge.node.get());
  }

  std::unordered_map<Node*, int> dependencies = count_dependencies(root_nodes);
  std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
  for (Node* node : root_nodes)
    if (dependencies[node] == 0) ready.push(node);

  std::ostream* trace = BackwardTrace::stream();
  BackwardRecorder* recorder = BackwardRecorder::active();
  if (recorder && !roots.empty()) recorder->on_start(roots.front().device());
  int step = 0;
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    auto buffer_it = buffers.find(node);
    TensorList grads = buffer_it != buffers.end() ? std::move(buffer_it->second.grads)
                                                  : TensorList(node->output_meta.size());
    if (buffer_it != buffers.end()) buffers.erase(buffer_it);

    for (size_t i = 0; i < grads.size(); ++i) {
      const TensorMeta& out = node->output_meta[i];
      if (!grads[i].defined()) grads[i] = zeros(out.sizes, TensorOptions(out.dtype, out.device));
      for (const GradHook& hook : node->output_hooks[i]) {
        Tensor replaced = hook(grads[i]);
        if (replaced.defined()) grads[i] = replaced;
      }
    }
    if (targets != nullptr) {
      // grad(): the gradient reaching a requested input is a result; no leaf's .grad is touched.
      auto wanted = targets->slots.find(node);
      if (wanted != targets->slots.end())
        for (const auto& [slot, index] : wanted->second) targets->results[index] = grads[slot];
      if (dynamic_cast<AccumulateGrad*>(node) != nullptr) continue;
    }
    const TensorList grads_in = trace || recorder ? grads : TensorList();
    TensorList input_grads = node->apply(std::move(grads));
    if (!retain_graph) node->release_saved();

    MINIDET_CHECK(input_grads.size() == node->next_edges.size() || input_grads.empty(), "backward of '",
                  node->name(), "' returned ", input_grads.size(), " gradients for ", node->next_edges.size(),
                  " inputs");
    for (size_t i = 0; i < input_grads.size(); ++i)
      if (input_grads[i].defined() && node->next_edges[i].valid())
        input_grads[i] = conform_to_input(*node, i, input_grads[i]);
    if (trace) BackwardTrace::print_step(*trace, ++step, *node, grads_in, input_grads);
    if (recorder) recorder->on_node(*node, grads_in, input_grads);
    if (AnomalyMode::is_enabled()) check_anomaly(*node, input_grads);

    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& edge = node->next_edges[i];
      if (!edge.valid()) continue;
      Node* next = edge.node.get();
      if (i < input_grads.size() && input_grads[i].defined()) {
        auto it = buffers.try_emplace(next, next->output_meta.size()).first;
        it->second.add(edge.input_nr, input_grads[i]);
      }
      if (--dependencies[next] == 0) ready.push(next);
    }
  }
}

}  // namespace

void register_hook(const Tensor& tensor, GradHook hook) {
  MINIDET_CHECK(tensor.requires_grad(), "register_hook: the tensor does not require grad, so no gradient will "
                "ever flow into it");
  AutogradMeta& meta = tensor.autograd_meta();
  if (meta.grad_fn) {
    meta.grad_fn->output_hooks.at(meta.output_nr).push_back(std::move(hook));
  } else {
    meta.hooks.push_back(std::move(hook));
  }
}

void register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(const Tensor&)> hook) {
  MINIDET_CHECK(leaf.requires_grad() && leaf.is_leaf(), "register_post_accumulate_grad_hook: the tensor must be ",
                "a leaf that requires grad (its gradient is accumulated into .grad); this one ",
                leaf.requires_grad() ? "is the output of an op" : "does not require grad");
  leaf.autograd_meta().post_accumulate_hooks.push_back(std::move(hook));
}

void retain_grad(const Tensor& tensor) {
  MINIDET_CHECK(tensor.requires_grad(), "retain_grad: the tensor does not require grad");
  if (tensor.is_leaf()) return;  // leaves keep .grad anyway
  AutogradMeta& meta = tensor.autograd_meta();
  if (meta.retains_grad) return;
  meta.retains_grad = true;
  // The hook holds only a weak reference, so retaining creates no cycle tensor -> node -> hook -> tensor.
  std::weak_ptr<TensorImpl> weak = tensor.impl_ptr();
  register_hook(tensor, [weak](const Tensor& grad) {
    if (auto impl = weak.lock()) {
      Tensor self(impl);
      AutogradMeta& m = self.autograd_meta();
      if (!m.grad.defined()) m.grad = grad.clone();
      else add_into(m.grad, grad);
    }
    return Tensor();
  });
}

void zero_grad(const Tensor& tensor, bool set_to_none) {
  AutogradMeta* meta = tensor.autograd_meta_if_exists();
  if (meta == nullptr || !meta->grad.defined()) return;
  if (set_to_none) meta->grad = Tensor();
  else meta->grad.zero_();
}

void set_name(const Tensor& tensor, const std::string& name) {
  AutogradMeta& meta = tensor.autograd_meta();
  meta.name = name;
  if (meta.grad_fn) {  // an op's output (a loss, say): its node shows the name in explorers
    std::vector<std::string>& names = meta.grad_fn->output_names;
    names.resize(meta.grad_fn->output_meta.size());
    names.at(meta.output_nr) = name;
  }
}

}  // namespace minidet::autograd

namespace minidet {
// Tensor::backward is declared in core/tensor.h and defined here, where the engine lives.
void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::backward({*this}, {grad}, retain_graph);
}
}  // namespace minidet
