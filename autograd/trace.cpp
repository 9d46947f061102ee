#include "autograd/trace.h"

#include <cmath>
#include <cstdio>
#include <iostream>

namespace minidet::autograd {
namespace {

thread_local std::ostream* t_trace_stream = nullptr;

void print_grad(std::ostream& out, const char* direction, size_t index, const Tensor& g) {
  char head[64];
  std::snprintf(head, sizeof head, "    %s grad[%zu]  ", direction, index);
  out << head;
  if (!g.defined()) {
    out << "(none: this input needs no gradient)\n";
    return;
  }
  char norm[48];
  std::snprintf(norm, sizeof norm, "%.6g", l2_norm(g));
  out << "shape=" << detail::compose(g.sizes()) << "  norm=" << norm;
  if (g.numel() <= BackwardTrace::kMaxValuesShown) {
    out << "  values=[";
    const std::vector<double> v = g.to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) {
      char num[32];
      std::snprintf(num, sizeof num, "%.4g", v[i]);
      out << (i ? ", " : "") << num;
    }
    out << "]";
  }
  out << "\n";
}

}  // namespace

std::ostream* BackwardTrace::stream() { return t_trace_stream; }
void BackwardTrace::set_stream(std::ostream* out) { t_trace_stream = out; }

void BackwardTrace::print_step(std::ostream& out, int step, const Node& node, const TensorList& grads_in,
                               const TensorList& grads_out) {
  out << "[backward " << step << "] " << node.name();
  if (const auto* sink = dynamic_cast<const AccumulateGrad*>(&node)) {  // say which leaf receives it
    const AutogradMeta* meta = sink->leaf().autograd_meta_if_exists();
    if (meta && !meta->name.empty()) out << " -> " << meta->name << ".grad";
  }
  out << "  (node #" << node.sequence_nr() << ")\n";
  for (size_t i = 0; i < grads_in.size(); ++i) print_grad(out, "in ", i, grads_in[i]);
  for (size_t i = 0; i < grads_out.size(); ++i) print_grad(out, "out", i, grads_out[i]);
}

BackwardTraceGuard::BackwardTraceGuard(std::ostream& out) : previous_(BackwardTrace::stream()) {
  BackwardTrace::set_stream(&out);
}
BackwardTraceGuard::BackwardTraceGuard() : BackwardTraceGuard(std::cout) {}
BackwardTraceGuard::~BackwardTraceGuard() { BackwardTrace::set_stream(previous_); }

double l2_norm(const Tensor& t) {
  double sum = 0;
  for (double v : t.to_vector<double>()) sum += v * v;
  return std::sqrt(sum);
}

}  // namespace minidet::autograd
