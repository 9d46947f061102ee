// Graph layout by Graphviz: DOT text in, SVG text out. The backward explorer (backward_html.h) draws the
// recorded graph with it, because laying out hundreds of nodes in nested clusters readably is a hard
// problem that Graphviz's `dot` solves well and a hand-written layout would not.
//
// Graphviz (libgvc + libcgraph, Debian: libgraphviz-dev) is optional at build time: without it
// graphviz_available() is false and layout_svg throws an error saying how to get it.
#pragma once

#include <string>

namespace minidet::autograd {

// Whether this build was configured with Graphviz.
bool graphviz_available();

// Lays out `dot_text` (a DOT graph) with the `dot` engine and renders it as SVG. Throws minidet::Error
// with Graphviz's own message when the text does not parse or the layout fails. Calls are serialised:
// Graphviz is not thread-safe.
std::string layout_svg(const std::string& dot_text);

}  // namespace minidet::autograd
