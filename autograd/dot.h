// Export the autograd graph as Graphviz DOT, to see what backward will walk:
//
//   std::ofstream("graph.dot") << autograd::to_dot({loss});
//   $ dot -Tpng graph.dot -o graph.png
//
// Op nodes are ellipses labelled with the op name and its output shapes; leaves (AccumulateGrad sinks)
// are boxes labelled with the tensor's name (autograd::set_name) and shape. Arrows follow the forward
// data flow, from inputs to the op that consumed them.
#pragma once

#include <string>

#include "autograd/node.h"

namespace minidet::autograd {

std::string to_dot(const TensorList& roots);

}  // namespace minidet::autograd
