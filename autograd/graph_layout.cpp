#include "autograd/graph_layout.h"

#include <cctype>
#include <mutex>

#include "core/error.h"

#if MINIDET_WITH_GRAPHVIZ
#include <gvc.h>
#endif

namespace minidet::autograd {

#if MINIDET_WITH_GRAPHVIZ

namespace {

// Graphviz reports errors through a callback rather than return values; collect them for our message.
std::string graphviz_messages;
int collect_message(char* text) {
  graphviz_messages += text;
  return 0;
}
std::string graphviz_said() {
  std::string text = graphviz_messages;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text.empty() ? "(no message)" : text;
}

// Frees what Graphviz allocated, in reverse order, however the layout ends.
struct Layout {
  GVC_t* context = gvContext();
  Agraph_t* graph = nullptr;
  bool laid_out = false;
  ~Layout() {
    if (laid_out) gvFreeLayout(context, graph);
    if (graph) agclose(graph);
    if (context) gvFreeContext(context);
  }
};

}  // namespace

bool graphviz_available() { return true; }

std::string layout_svg(const std::string& dot_text) {
  static std::mutex graphviz_mutex;
  std::lock_guard<std::mutex> lock(graphviz_mutex);
  graphviz_messages.clear();
  agusererrf previous = agseterrf(collect_message);
  struct RestoreErrf {
    agusererrf previous;
    ~RestoreErrf() { agseterrf(previous); }
  } restore{previous};

  Layout layout;
  MINIDET_CHECK(layout.context != nullptr, "layout_svg: Graphviz could not create a context");
  layout.graph = agmemread(dot_text.c_str());
  MINIDET_CHECK(layout.graph != nullptr, "layout_svg: Graphviz could not parse the DOT text: ", graphviz_said());
  MINIDET_CHECK(gvLayout(layout.context, layout.graph, "dot") == 0,
                "layout_svg: Graphviz's dot layout failed (is the dot layout plugin installed?): ", graphviz_said());
  layout.laid_out = true;
  char* data = nullptr;
  unsigned int length = 0;
  MINIDET_CHECK(gvRenderData(layout.context, layout.graph, "svg", &data, &length) == 0 && data != nullptr,
                "layout_svg: Graphviz could not render SVG (is the core plugin installed?): ", graphviz_said());
  std::string svg(data, length);
  gvFreeRenderData(data);
  return svg;
}

#else

bool graphviz_available() { return false; }

std::string layout_svg(const std::string&) {
  MINIDET_FAIL("layout_svg: this build of minidet has no Graphviz, so it cannot lay out the backward explorer's "
               "graph. Install it (Debian: apt-get install libgraphviz-dev pkg-config) and reconfigure "
               "(cmake --preset ...). A record (BackwardRecord::to_json) can also be turned into a page on "
               "a machine that has it.");
}

#endif

}  // namespace minidet::autograd
