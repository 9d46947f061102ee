// The backward trace: watch backpropagation happen, one node at a time.
//
//   autograd::BackwardTraceGuard trace;   // prints to std::cout; pass a stream to redirect
//   loss.backward();
//
// prints, for each node in execution order, its name and, for every incoming gradient (one per forward
// output) and outgoing gradient (one per forward input), the shape, the L2 norm and, for small tensors,
// the values:
//
//   [backward 1] MeanBackward  (node #7)
//       in  grad[0]  shape=()      norm=1.0000   values=[1.0000]
//       out grad[0]  shape=(4, 2)  norm=0.3536   values=[0.1250, 0.1250, ...]
#pragma once

#include <ostream>

#include "autograd/node.h"

namespace minidet::autograd {

class BackwardTrace {
 public:
  static std::ostream* stream();  // null when tracing is off
  static void set_stream(std::ostream* out);
  static void print_step(std::ostream& out, int step, const Node& node, const TensorList& grads_in,
                         const TensorList& grads_out);
  // Values are printed for tensors with at most this many elements.
  static constexpr int64_t kMaxValuesShown = 16;
};

class BackwardTraceGuard {
 public:
  explicit BackwardTraceGuard(std::ostream& out);
  BackwardTraceGuard();
  ~BackwardTraceGuard();
  BackwardTraceGuard(const BackwardTraceGuard&) = delete;
  BackwardTraceGuard& operator=(const BackwardTraceGuard&) = delete;

 private:
  std::ostream* previous_;
};

// L2 norm of a tensor, as a double (host-side; for traces and reports).
double l2_norm(const Tensor& t);

}  // namespace minidet::autograd
