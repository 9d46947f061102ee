// The autograd graph: nodes and the edges between them.
//
// Every recorded op becomes one Node. A Node's inputs in the *forward* pass are its edges in the *backward*
// pass: next_edges[i] points at the node that produced forward input i (its grad_fn), or at the leaf's
// AccumulateGrad sink, or is empty when input i needs no gradient.
//
//      forward:   x (leaf) ---+
//                             mul --> y --> sum --> loss
//      w (leaf) --------------+
//
//      backward:  loss.grad_fn = SumNode --edge--> MulNode --edge 0--> AccumulateGrad(x)
//                                                          --edge 1--> AccumulateGrad(w)
//
// A node's apply() maps the gradients of its forward outputs to the gradients of its forward inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace minidet::autograd {

using TensorList = std::vector<Tensor>;
using GradHook = std::function<Tensor(const Tensor&)>;

class Node;

// Where a gradient goes: input slot `input_nr` of `node` (a forward output index of that node).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

// Shape, dtype and device of a tensor, kept instead of the tensor itself when only those are needed.
struct TensorMeta {
  Shape sizes;
  DType dtype = kFloat32;
  Device device;
  static TensorMeta of(const Tensor& t) { return {t.sizes(), t.dtype(), t.device()}; }
};

// A tensor kept for backward. It stores a data-only alias (no autograd state, so an op saving its own
// output creates no reference cycle) and the storage version at save time: if anything writes to the
// storage in place before backward, unpack() refuses instead of silently using the new values.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& tensor);
  Tensor unpack(const std::string& node_name, size_t index) const;
  void release() { data_ = Tensor(); }

 private:
  Tensor data_;
  uint64_t saved_version_ = 0;
  bool was_defined_ = false;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(std::string name);
  virtual ~Node();  // releases the chain behind it iteratively: a 100,000-node graph must not recurse
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  uint64_t sequence_nr() const { return sequence_nr_; }

  // Gradients of the forward outputs in, gradients of the forward inputs out (one per edge; an undefined
  // tensor where an input needs none).
  virtual TensorList apply(TensorList grad_outputs) = 0;
  // Frees what was saved for backward (after a backward without retain_graph).
  virtual void release_saved() {}

  std::vector<Edge> next_edges;          // one per forward input
  std::vector<TensorMeta> input_meta;    // shapes of the forward inputs: gradients are checked against them
  std::vector<TensorMeta> output_meta;   // shapes of the forward outputs: missing gradients become zeros
  std::vector<std::vector<GradHook>> output_hooks;  // hooks of non-leaf outputs, run on their gradients
  std::string creation_context;          // filled in anomaly mode: where the forward op was called
  std::string scope;                     // the module that created it, while scopes are recorded (scope.h)
  const char* source = nullptr;          // the source file that recorded it (autograd::record's caller)
  std::vector<std::string> output_names; // names given to its outputs with set_name ("" if none), or empty

 private:
  std::string name_;
  uint64_t sequence_nr_;
};

// The node for every op recorded through autograd::record (autograd/function.h).
class FunctionNode;

// The sink at the end of every path to a leaf: adds the incoming gradient into leaf.grad(), after running
// the leaf's hooks, then runs its post-accumulate hooks. One per leaf, shared by all uses, so gradients from
// several paths are summed first (and a post-accumulate hook runs once per backward).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf);
  TensorList apply(TensorList grad_outputs) override;
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

// The edge that carries gradient to `tensor`: its grad_fn, or its AccumulateGrad if it is a leaf that
// requires grad, or an invalid edge when it needs no gradient.
Edge gradient_edge(const Tensor& tensor);

}  // namespace minidet::autograd
