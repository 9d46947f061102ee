#include "autograd/dot.h"

#include <sstream>
#include <unordered_set>

namespace minidet::autograd {
namespace {

std::string shapes_label(const std::vector<TensorMeta>& metas) {
  std::string label;
  for (size_t i = 0; i < metas.size(); ++i) label += (i ? " " : "") + detail::compose(metas[i].sizes);
  return label;
}

// Labels are user text (tensor names): escape what DOT treats specially inside a quoted string.
std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string node_id(const Node* node) { return "n" + std::to_string(node->sequence_nr()); }

void declare(std::ostringstream& out, const Node* node) {
  if (const auto* sink = dynamic_cast<const AccumulateGrad*>(node)) {
    const AutogradMeta* meta = sink->leaf().autograd_meta_if_exists();
    const std::string name = meta && !meta->name.empty() ? escaped(meta->name) : "leaf";
    out << "  " << node_id(node) << " [shape=box, style=filled, fillcolor=lightblue, label=\"" << name << "\\n"
        << detail::compose(sink->leaf().sizes()) << "\"];\n";
  } else {
    out << "  " << node_id(node) << " [label=\"" << node->name() << "\\n" << shapes_label(node->output_meta)
        << "\"];\n";
  }
}

}  // namespace

std::string to_dot(const TensorList& roots) {
  std::ostringstream out;
  out << "digraph autograd {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack;
  // A leaf root's AccumulateGrad may exist only through this edge: keep it alive while we walk.
  std::vector<std::shared_ptr<Node>> root_owners;
  for (size_t r = 0; r < roots.size(); ++r) {
    const Edge edge = gradient_edge(roots[r]);
    if (!edge.valid()) continue;
    root_owners.push_back(edge.node);
    out << "  root" << r << " [shape=plaintext, label=\"output " << r << "\"];\n";
    out << "  " << node_id(edge.node.get()) << " -> root" << r << ";\n";
    if (seen.insert(edge.node.get()).second) stack.push_back(edge.node.get());
  }
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    declare(out, node);
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& edge = node->next_edges[i];
      if (!edge.valid()) continue;
      out << "  " << node_id(edge.node.get()) << " -> " << node_id(node) << " [label=\"" << i << "\"];\n";
      if (seen.insert(edge.node.get()).second) stack.push_back(edge.node.get());
    }
  }
  out << "}\n";
  return out.str();
}

}  // namespace minidet::autograd
