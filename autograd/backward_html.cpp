#include "autograd/backward_html.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "autograd/explorer/embedded.h"
#include "autograd/graph_layout.h"
#include "autograd/json_text.h"
#include "core/error.h"

namespace minidet::autograd {
namespace {

// ---- text escaping -----------------------------------------------------------------------------------

// Inside a quoted DOT string only " and \ are special (\ would start Graphviz's \N, \G, ... escapes); a line
// break is written as Graphviz's \n (a centred line).
std::string dot_quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// JSON placed inside <script>: "</script" or "<!--" in a string would end or confuse the element. '<' only
// occurs inside JSON strings, where "<\/" and "\u003c" are valid spellings of the same text.
std::string script_safe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') {
      out += "<\\/";
      ++i;
    } else if (json.compare(i, 4, "<!--") == 0) {
      out += "\\u003c";
    } else {
      out += json[i];
    }
  }
  return out;
}

std::string html_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// ---- the graph in DOT ----------------------------------------------------------------------------------

// The module a node is drawn in. A leaf's AccumulateGrad sits with its parameter's module (the leaf
// "backbone.stem.conv.weight" in "backbone.stem.conv"), wherever the graph happened to create it.
// explorer.js (clusterScopeOf) mirrors this rule to collapse clusters.
std::string cluster_scope(const RecordedNode& node) {
  if (node.is_leaf() && !node.leaf.empty()) {
    const size_t dot = node.leaf.rfind('.');
    return dot == std::string::npos ? "" : node.leaf.substr(0, dot);
  }
  return node.scope;
}

std::string parent_scope(const std::string& scope) {
  const size_t dot = scope.rfind('.');
  return dot == std::string::npos ? "" : scope.substr(0, dot);
}

std::string node_label(const RecordedNode& node) {
  const Shape* shape = nullptr;
  if (node.is_leaf() && node.leaf_grad) shape = &node.leaf_grad->sizes;
  else if (!node.outputs.empty()) shape = &node.outputs[0].sizes;
  else if (!node.inputs.empty()) shape = &node.inputs[0].sizes;
  const std::string name = node.is_leaf() ? (node.leaf.empty() ? "leaf" : node.leaf) : node.op;
  return shape ? name + "\n" + detail::compose(*shape) : name;
}

// One cluster per scope, nested by path component: backbone > backbone.stage4 > backbone.stage4.0 > ...
struct ClusterTree {
  std::map<std::string, std::vector<const RecordedNode*>> nodes;  // scope -> the nodes drawn directly in it
  std::map<std::string, std::set<std::string>> children;         // scope -> its child scopes

  explicit ClusterTree(const BackwardRecord& record) {
    for (const RecordedNode& node : record.nodes) {
      std::string scope = cluster_scope(node);
      nodes[scope].push_back(&node);
      while (!scope.empty()) {  // make every ancestor exist, even one that holds no node directly
        const std::string parent = parent_scope(scope);
        if (!children[parent].insert(scope).second) break;
        scope = parent;
      }
    }
  }

  void write(std::ostringstream& out, const std::string& scope, int depth, int& next_cluster) const {
    const std::string indent(2 * depth + 2, ' ');
    if (auto it = nodes.find(scope); it != nodes.end()) {
      for (const RecordedNode* node : it->second) {
        out << indent << 'n' << node->id << " [id=\"n" << node->id << "\", label=" << dot_quoted(node_label(*node));
        if (node->is_leaf()) out << ", shape=box";
        out << "];\n";
      }
    }
    if (auto it = children.find(scope); it != children.end()) {
      for (const std::string& child : it->second) {
        const size_t dot = child.rfind('.');
        const std::string name = dot == std::string::npos ? child : child.substr(dot + 1);
        out << indent << "subgraph cluster_" << next_cluster++ << " {\n"
            << indent << "  id=" << dot_quoted("c:" + child) << "; label=" << dot_quoted(name) << ";\n";
        write(out, child, depth + 1, next_cluster);
        out << indent << "}\n";
      }
    }
  }
};

// Gradients flow downwards: the loss (step 1) on top, an edge from each node to where it sends each input's
// gradient, the leaves at the bottom.
std::string backward_dot(const BackwardRecord& record) {
  std::ostringstream out;
  out << "digraph backward {\n"
         "  rankdir=TB; nodesep=0.15; ranksep=0.3;\n"
         "  graph [fontname=\"Helvetica\", fontsize=10, labeljust=l];\n"
         "  node [fontname=\"Helvetica\", fontsize=9, height=0.3, margin=\"0.06,0.02\"];\n"
         "  edge [arrowsize=0.5];\n";
  int next_cluster = 0;
  ClusterTree(record).write(out, "", 0, next_cluster);
  std::set<int64_t> ids;  // an edge to a node outside the record would make Graphviz invent that node
  for (const RecordedNode& node : record.nodes) ids.insert(node.id);
  for (const RecordedNode& node : record.nodes) {
    for (size_t i = 0; i < node.edges.size(); ++i) {
      const int64_t to = node.edges[i].to;
      if (to < 0 || !ids.count(to)) continue;
      out << "  n" << node.id << " -> n" << to << " [id=\"e" << node.id << '_' << i << "\"];\n";
    }
  }
  out << "}\n";
  return out.str();
}

// ---- the op docs -----------------------------------------------------------------------------------------

// The header documenting the op recorded in `source` ("ops/conv2d/conv2d.cpp"): the header with the same
// stem in that folder if it has a doc, else the folder's own header (ops/<folder>/<folder>.h), else "".
std::string doc_header_for(const std::string& source) {
  const auto& docs = explorer::op_header_docs();
  const size_t slash = source.rfind('/');
  const size_t dot = source.rfind('.');
  if (slash == std::string::npos || dot == std::string::npos || dot < slash) return "";
  const std::string folder = source.substr(0, slash);
  const std::string same_stem = source.substr(0, dot) + ".h";
  if (docs.count(same_stem)) return same_stem;
  const std::string folder_header = folder + "/" + folder.substr(folder.rfind('/') + 1) + ".h";
  return docs.count(folder_header) ? folder_header : "";
}

// {"by_source": {"ops/conv2d/conv2d.cpp": "ops/conv2d/conv2d.h", ...}, "headers": {"ops/conv2d/conv2d.h": "..."}}
// with only the ops that appear in the record.
std::string docs_json(const BackwardRecord& record) {
  std::map<std::string, std::string> by_source;
  for (const RecordedNode& node : record.nodes) {
    if (node.source.empty() || by_source.count(node.source)) continue;
    const std::string header = doc_header_for(node.source);
    if (!header.empty()) by_source[node.source] = header;
  }
  std::set<std::string> headers;
  std::string out = "{\"by_source\": {";
  for (const auto& [source, header] : by_source) {
    out += (headers.empty() ? "\n" : ",\n") + json_quoted(source) + ": " + json_quoted(header);
    headers.insert(header);
  }
  out += "},\n\"headers\": {";
  bool first = true;
  for (const std::string& header : headers) {
    out += (first ? "\n" : ",\n") + json_quoted(header) + ": " + json_quoted(explorer::op_header_docs().at(header));
    first = false;
  }
  return out + "}}";
}

// ---- the page --------------------------------------------------------------------------------------------

// Graphviz writes an XML prologue and a DOCTYPE before <svg>; inline SVG in HTML starts at the element.
std::string inline_svg(const std::string& svg) {
  const size_t start = svg.find("<svg");
  MINIDET_CHECK(start != std::string::npos, "backward_html: Graphviz's output has no <svg> element");
  return svg.substr(start);
}

// Replaces each {{name}} of the template once; the values are not scanned again, so a {{ inside the
// script or the data is left alone.
std::string fill(const std::string& page_template, const std::map<std::string, std::string>& values) {
  std::string out;
  size_t position = 0;
  while (true) {
    const size_t open = page_template.find("{{", position);
    if (open == std::string::npos) break;
    const size_t close = page_template.find("}}", open);
    MINIDET_CHECK(close != std::string::npos, "backward_html: unclosed {{ in explorer.html");
    const std::string name = page_template.substr(open + 2, close - open - 2);
    const auto it = values.find(name);
    MINIDET_CHECK(it != values.end(), "backward_html: explorer.html names an unknown placeholder {{", name, "}}");
    out.append(page_template, position, open - position);
    out += it->second;
    position = close + 2;
  }
  out.append(page_template, position, std::string::npos);
  return out;
}

}  // namespace

bool backward_html_available() { return graphviz_available(); }

std::string backward_html(const BackwardRecord& record) {
  const std::string title = record.options.title.empty() ? "backward pass" : record.options.title;
  return fill(explorer::page_template(), {
      {"title", html_escaped(title)},
      {"css", explorer::page_css()},
      {"svg", inline_svg(layout_svg(backward_dot(record)))},
      {"record", script_safe(record.to_json())},
      {"docs", script_safe(docs_json(record))},
      {"js", explorer::page_js()},
  });
}

void write_backward_html(const BackwardRecord& record, const std::string& path) {
  const std::string page = backward_html(record);
  std::ofstream file(path, std::ios::binary);
  MINIDET_CHECK(file.good(), "write_backward_html: cannot open ", path, " for writing");
  file << page;
  MINIDET_CHECK(file.good(), "write_backward_html: writing ", path, " failed");
}

void write_backward_html(const TensorList& roots, const std::string& path, const RecordOptions& options) {
  // Fail before backward runs (and frees the graph) when the page cannot be made anyway.
  MINIDET_CHECK(backward_html_available(), "write_backward_html: this build of minidet has no Graphviz to lay out "
                "the page; install it (Debian: apt-get install libgraphviz-dev pkg-config) and reconfigure");
  write_backward_html(record_backward(roots, options), path);
}

}  // namespace minidet::autograd
