// The backward explorer: one self-contained HTML page that plays a recorded backward pass node by node.
//
//   autograd::ScopeRecordingGuard scopes;                     // group nodes by module (autograd/scope.h)
//   Tensor loss = ...;
//   autograd::write_backward_html({loss}, "step.html");       // runs backward, records it, writes the page
//
// The page holds everything inline (no network): the record as JSON (autograd/backward_record.h), the graph
// laid out by Graphviz (libgvc, dot layout, rendered to SVG) with one cluster per module scope, the op docs
// (the comment block that opens each op's header, taken at build time) and the script that plays it:
// next / previous / play / jump, the running node and the edges its gradients just crossed highlighted,
// each leaf's .grad appearing as its AccumulateGrad runs, a panel with the node's shapes, gradient
// statistics, histogram and heat maps, search by op, module or parameter name, and the path from a node
// (a loss, say) down to the parameters its gradient reaches.
//
// Graphviz is optional at build time (Debian: libgraphviz-dev). Without it backward_html_available() is false
// and the writers throw a clear error; record_backward and BackwardRecord::to_json still work, so a record
// made there can be turned into a page on a machine that has it (minidet explain --from-record).
#pragma once

#include <string>

#include "autograd/backward_record.h"

namespace minidet::autograd {

// Whether this build can lay out graphs (Graphviz found when it was configured).
bool backward_html_available();

// The page for a record.
std::string backward_html(const BackwardRecord& record);
void write_backward_html(const BackwardRecord& record, const std::string& path);
// record_backward(roots, options), then the page: leaves' .grad accumulate as in loss.backward().
void write_backward_html(const TensorList& roots, const std::string& path, const RecordOptions& options = {});

}  // namespace minidet::autograd
