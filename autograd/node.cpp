#include "autograd/node.h"

#include <atomic>
#include <utility>

#include "autograd/scope.h"
#include "core/accumulate.h"

namespace minidet::autograd {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}

SavedTensor::SavedTensor(const Tensor& tensor) : was_defined_(tensor.defined()) {
  if (!tensor.defined()) return;
  data_ = tensor.detach();
  saved_version_ = tensor.version();
}

Tensor SavedTensor::unpack(const std::string& node_name, size_t index) const {
  if (!was_defined_) return Tensor();
  MINIDET_CHECK(data_.defined(), "backward through ", node_name, " a second time: its saved tensors were freed ",
                "after the first backward. Pass retain_graph=true to the first backward to keep them.");
  MINIDET_CHECK(data_.version() == saved_version_, "a tensor saved by ", node_name, " for backward (saved tensor ",
                index, ", shape ", data_.sizes(), ") was modified in place after it was saved (version ",
                data_.version(), ", expected ", saved_version_, "). Clone it before modifying it.");
  return data_;
}

Node::Node(std::string name) : name_(std::move(name)), sequence_nr_(g_next_sequence_nr++) {
  if (scopes_recording()) scope = current_scope();
}

Node::~Node() {
  // Destroying a node drops its edges, which may destroy the next node, which drops its edges... On a long
  // chain that recursion overflows the stack. Instead, steal the edges of every node we are about to
  // destroy (we hold its last reference) onto an explicit stack, so each node dies with no edges left.
  std::vector<std::shared_ptr<Node>> doomed;
  for (Edge& edge : next_edges)
    if (edge.node) doomed.push_back(std::move(edge.node));
  while (!doomed.empty()) {
    std::shared_ptr<Node> node = std::move(doomed.back());
    doomed.pop_back();
    if (node.use_count() == 1) {
      for (Edge& edge : node->next_edges)
        if (edge.node) doomed.push_back(std::move(edge.node));
    }
  }
}

namespace {
// This handle is the tensor's only one, and the tensor is its storage's only view, all of it.
bool owns_its_memory(const Tensor& t) {
  return t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1 && !t.requires_grad() &&
         t.is_contiguous() && t.storage_offset() == 0 &&
         t.storage()->nbytes() == static_cast<size_t>(t.numel()) * element_size(t.dtype());
}
}  // namespace

AccumulateGrad::AccumulateGrad(const Tensor& leaf) : Node("AccumulateGrad"), leaf_(leaf) {
  input_meta.push_back(TensorMeta::of(leaf));
  output_meta.push_back(TensorMeta::of(leaf));
  output_hooks.resize(1);
}

TensorList AccumulateGrad::apply(TensorList grad_outputs) {
  Tensor grad = std::move(grad_outputs.at(0));
  for (const GradHook& hook : leaf_.autograd_meta().hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  AutogradMeta& meta = leaf_.autograd_meta();
  if (!meta.grad.defined()) {
    // The user may later modify .grad in place (zero_grad, clipping, an optimizer's weight decay), so .grad
    // must be memory nobody else sees. The incoming tensor often is already (a backward's fresh result that
    // only this call holds): then it becomes .grad as it is, as in PyTorch, saving a copy kernel per
    // parameter per step. Otherwise (a hook kept it, another node's buffer shares it, it views a larger
    // buffer) a fresh copy.
    meta.grad = owns_its_memory(grad) && grad.sizes() == leaf_.sizes() ? grad : grad.clone();
  } else {
    add_into(meta.grad, grad);
  }
  // Indexed, not range-for: a hook may register another hook (the vector may grow while we walk it).
  for (size_t i = 0; i < meta.post_accumulate_hooks.size(); ++i) meta.post_accumulate_hooks[i](leaf_);
  return {};
}

Edge gradient_edge(const Tensor& tensor) {
  if (!tensor.defined() || !tensor.requires_grad()) return {};
  AutogradMeta& meta = tensor.autograd_meta();
  if (meta.grad_fn) return {meta.grad_fn, meta.output_nr};
  std::shared_ptr<Node> sink = meta.grad_accumulator.lock();
  if (!sink) {
    sink = std::make_shared<AccumulateGrad>(tensor);
    meta.grad_accumulator = sink;
  }
  return {sink, 0};
}

}  // namespace minidet::autograd
