#include "autograd/function.h"

#include "autograd/anomaly.h"

namespace minidet::autograd {

FunctionNode::FunctionNode(std::string name, BackwardFn backward, const TensorList& saved)
    : Node(std::move(name)), backward_(std::move(backward)) {
  saved_.reserve(saved.size());
  for (const Tensor& t : saved) saved_.emplace_back(t);
}

TensorList FunctionNode::apply(TensorList grad_outputs) {
  BackwardContext ctx(*this);
  return backward_(ctx, grad_outputs);
}

void FunctionNode::release_saved() {
  for (SavedTensor& s : saved_) s.release();
}

Tensor BackwardContext::saved(size_t i) const {
  MINIDET_CHECK(i < node_.saved_.size(), node_.name(), " backward: asked for saved tensor ", i, " but only ",
                node_.saved_.size(), " were saved");
  return node_.saved_[i].unpack(node_.name(), i);
}

bool BackwardContext::needs_input_grad(size_t i) const {
  return i < node_.next_edges.size() && node_.next_edges[i].valid();
}

const Shape& BackwardContext::input_sizes(size_t i) const { return node_.input_meta.at(i).sizes; }

bool any_requires_grad(const TensorList& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const std::string& name, const TensorList& inputs, const TensorList& outputs, const TensorList& saved,
            BackwardFn backward, const char* source) {
  if (!any_requires_grad(inputs)) return;
  auto node = std::make_shared<FunctionNode>(name, std::move(backward), saved);
  node->source = source;
  for (const Tensor& input : inputs) {
    node->next_edges.push_back(gradient_edge(input));
    node->input_meta.push_back(input.defined() ? TensorMeta::of(input) : TensorMeta{});
  }
  node->output_hooks.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    node->output_meta.push_back(TensorMeta::of(out));
    MINIDET_CHECK(is_floating(out.dtype()), name, ": output ", i, " has dtype ", out.dtype(),
                  " and cannot carry a gradient; record only floating outputs");
    MINIDET_CHECK(out.is_leaf() && !out.autograd_meta().requires_grad, name, ": output ", i,
                  " already belongs to the graph; an op must record fresh output tensors");
    AutogradMeta& meta = out.autograd_meta();
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
  }
  if (AnomalyMode::is_enabled()) node->creation_context = capture_creation_context(name);
}

}  // namespace minidet::autograd
