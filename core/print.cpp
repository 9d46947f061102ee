// Printing: values first, then shape, dtype and device, in the style of PyTorch's repr.
//
//   tensor([[ 1.0000, -2.5000],
//           [ 3.0000,  4.0000]], shape=(2, 2), dtype=float32, device=cpu)
//
// Tensors with more than kSummarizeAbove elements show only the first and last kEdgeItems along each
// dim, with "..." between.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "core/tensor.h"

namespace minidet {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Printer {
  std::vector<double> values;    // floating tensors, row-major
  std::vector<int64_t> integers;  // integer and bool tensors, row-major: exact beyond 2^53
  Shape sizes;
  Shape strides;
  DType dtype;
  bool summarize;
  bool scientific = false;
  size_t width = 0;

  std::string format(int64_t index) const {
    char buf[64];
    if (dtype == kBool) return integers[index] != 0 ? "True" : "False";
    if (!is_floating(dtype)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(integers[index]));
      return buf;
    }
    const double v = values[index];
    if (std::isnan(v) || std::isinf(v)) {
      std::snprintf(buf, sizeof buf, "%s", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
    } else {
      std::snprintf(buf, sizeof buf, scientific ? "%.4e" : "%.4f", v);
    }
    return buf;
  }

  // Indices shown along a dim of size n.
  std::vector<int64_t> shown(int64_t n) const {
    std::vector<int64_t> idx;
    if (!summarize || n <= 2 * kEdgeItems) {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(-1);  // the "..." marker
      for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }

  // Calls fn(flat index) for every element that will be shown.
  void visit(size_t d, int64_t offset, const std::function<void(int64_t)>& fn) const {
    if (d == sizes.size()) return fn(offset);
    for (int64_t i : shown(sizes[d]))
      if (i >= 0) visit(d + 1, offset + i * strides[d], fn);
  }

  void print(std::string& out, size_t d, int64_t offset, size_t indent) const {
    if (d == sizes.size()) {
      std::string s = format(offset);
      out += std::string(width - std::min(width, s.size()), ' ') + s;
      return;
    }
    out += '[';
    bool first = true;
    for (int64_t i : shown(sizes[d])) {
      // Innermost dims separate with ", "; outer dims start a new line, a blank one per extra level.
      if (!first) {
        out += d + 1 == sizes.size() ? ", " : "," + std::string(sizes.size() - d - 1, '\n') +
                                                  std::string(indent + d + 1, ' ');
      }
      first = false;
      if (i < 0) out += "...";
      else print(out, d + 1, offset + i * strides[d], indent);
    }
    out += ']';
  }
};

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  Printer p;
  if (is_floating(dtype())) p.values = to_vector<double>();
  else p.integers = to_vector<int64_t>();
  p.sizes = sizes();
  p.strides = contiguous_strides(sizes());
  p.dtype = dtype();
  p.summarize = numel() > kSummarizeAbove;
  double max_abs = 0, min_abs = INFINITY;
  p.visit(0, 0, [&](int64_t i) {
    if (p.values.empty()) return;
    const double v = p.values[i];
    if (!std::isfinite(v) || v == 0) return;
    max_abs = std::max(max_abs, std::fabs(v));
    min_abs = std::min(min_abs, std::fabs(v));
  });
  p.scientific = is_floating(dtype()) && (max_abs >= 1e8 || (min_abs < 1e-4 && max_abs > 0));
  p.visit(0, 0, [&](int64_t i) { p.width = std::max(p.width, p.format(i).size()); });

  std::string out = "tensor(";
  if (numel() == 0) out += "[]";
  else p.print(out, 0, 0, 7);
  out += ", shape=" + detail::compose(sizes()) + ", dtype=" + dtype_name(dtype()) + ", device=" + device().str();
  if (requires_grad()) out += ", requires_grad=true";
  return out + ")";
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) { return out << tensor.str(); }

}  // namespace minidet
