// The backward engine.
//
// backward({loss}) runs every node between loss and the leaves exactly once, in an order where a node
// runs only after all gradients flowing into it have arrived and been summed:
//
//   1. Walk the graph from the roots (with an explicit stack, never recursion) and count, for each node,
//      how many edges point at it: its dependencies.
//   2. Seed the roots' input buffers with the root gradients (1 for a scalar loss).
//   3. Repeatedly take a ready node (dependencies all satisfied; the most recently created first), run its
//      hooks and its backward, reduce each returned gradient to its input's shape (sum_to: the one place
//      where broadcasting is undone), add it into the next node's input buffer, and decrement that node's
//      count; a node whose count reaches zero becomes ready.
//   4. Leaves end in AccumulateGrad, which adds into .grad().
//
// A node with several outputs of which only some received a gradient gets zeros for the others (their shapes
// are recorded), so every backward formula sees a full set of defined gradients.
//
// Without retain_graph, each node frees its saved tensors once it has run; a second backward through it
// raises an error that says to use retain_graph.
#pragma once

#include "autograd/node.h"

namespace minidet::autograd {

// grad_roots: one per root; an undefined entry (or an empty list) means ones for a single-element root.
void backward(const TensorList& roots, const TensorList& grad_roots = {}, bool retain_graph = false);

// The gradients of `outputs` with respect to `inputs` (torch.autograd.grad): one per input, undefined where
// no path leads to it. Runs the same engine as backward(), but leaves' .grad() are left alone (neither
// accumulated nor hooked), so it computes gradients without training anything. grad_outputs as in
// backward(); inputs must require grad.
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                bool retain_graph = false);

// A hook sees the gradient flowing into `tensor` and may return a replacement (or an undefined Tensor to
// keep it). Leaves run hooks before accumulating into .grad(); non-leaves before their grad_fn runs.
void register_hook(const Tensor& tensor, GradHook hook);
// Runs hook(leaf) each time backward has finished adding into leaf.grad(): once per backward, as soon as
// this leaf's gradient is complete, while backward goes on with the rest of the graph (like PyTorch's
// register_post_accumulate_grad_hook). The hook sees the summed .grad() and may read it, or start
// something with it (dist::DistributedDataParallel starts the all-reduce of a bucket there); it returns
// nothing, because by then the gradient is stored. Leaves that require grad only.
void register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(const Tensor&)> hook);
// Makes a non-leaf tensor store its gradient in .grad() too.
void retain_grad(const Tensor& tensor);
// Clears .grad(): drops it (set_to_none, the default) or fills it with zeros.
void zero_grad(const Tensor& tensor, bool set_to_none = true);
// A label shown in backward traces, DOT graphs and the backward explorer: a leaf's name, or an op output's
// (a loss's, say), which its node then lists in output_names.
void set_name(const Tensor& tensor, const std::string& name);

}  // namespace minidet::autograd
