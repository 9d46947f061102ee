// autograd::record: the one way every op in minidet joins the autograd graph.
//
// An op computes its outputs eagerly with raw kernels, then records how to differentiate them:
//
//   Tensor mul(const Tensor& a, const Tensor& b) {
//     Tensor out = mul_kernel(a, b);                       // forward: raw, not recorded
//     autograd::record("mul", {a, b}, {out}, /*saved=*/{a, b},
//         [](autograd::BackwardContext& ctx, const autograd::TensorList& grads) -> autograd::TensorList {
//           const Tensor a = ctx.saved(0), b = ctx.saved(1);
//           return {mul(grads[0], b), mul(grads[0], a)};  // d(out)/da, d(out)/db, times the upstream grad
//         });
//     return out;
//   }
//
// record() does nothing when grad mode is off or no input requires grad, so inference pays nothing.
// Otherwise it makes a FunctionNode with an edge to each input's gradient_edge, keeps `saved` as
// SavedTensors (version-checked, freed after backward), and sets each output's grad_fn.
//
// The backward function returns one gradient per input (an undefined Tensor where an input needs none, see
// ctx.needs_input_grad). It may return a gradient with the *broadcast* shape of the output: the engine
// reduces it to the input's shape with sum_to, in one place for every op. Everything it needs beyond the
// saved tensors (sizes, scalars, options) it captures by value in the lambda; tensors must go through
// `saved`, never captured, so that version checks and freeing apply to them.
#pragma once

#include <functional>
#include <string>

#include "autograd/node.h"

namespace minidet::autograd {

class BackwardContext;
using BackwardFn = std::function<TensorList(BackwardContext& ctx, const TensorList& grad_outputs)>;

class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn backward, const TensorList& saved);
  TensorList apply(TensorList grad_outputs) override;
  void release_saved() override;

 private:
  friend class BackwardContext;
  BackwardFn backward_;
  std::vector<SavedTensor> saved_;
};

class BackwardContext {
 public:
  explicit BackwardContext(FunctionNode& node) : node_(node) {}
  // Saved tensor i, checked against in-place modification since it was saved.
  Tensor saved(size_t i) const;
  // Whether forward input i needs a gradient; skip computing the ones that do not.
  bool needs_input_grad(size_t i) const;
  // Shape of forward input i.
  const Shape& input_sizes(size_t i) const;

 private:
  FunctionNode& node_;
};

// True when an op applied to `inputs` now would be recorded.
bool any_requires_grad(const TensorList& inputs);

// `source` is the caller's file, filled in by the compiler (GCC and Clang's __builtin_FILE, as C++20's
// std::source_location would): the backward explorer shows it, and the op's header docs next to it.
void record(const std::string& name, const TensorList& inputs, const TensorList& outputs, const TensorList& saved,
            BackwardFn backward, const char* source = __builtin_FILE());

}  // namespace minidet::autograd
