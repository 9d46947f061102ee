// CPU kernels for max/min/argmax (one scan per row), their scatter backward, and topk (a selection, then a
// sort of the k selected, per row). Rows are independent, so each loop is parallel over rows.
#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/reduction/reduction_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
void extremum_rows_loop(Extremum kind, const T* x, RowLayout layout, T* values, int64_t* indices) {
  const int64_t rows = layout.rows();
#pragma omp parallel for if (rows * layout.size > kParallelAbove)
  for (int64_t row = 0; row < rows; ++row) {
    const T* in = x + layout.base(row);
    T best = in[0];
    int64_t best_index = 0;
    for (int64_t k = 1; k < layout.size; ++k) {
      const T v = in[k * layout.inner];
      if (beats(kind, v, best)) {
        best = v;
        best_index = k;
      }
    }
    values[row] = best;
    indices[row] = best_index;
  }
}

template <typename T>
void scatter_rows_loop(T* grad_x, RowLayout layout, const T* grad, const int64_t* indices, int64_t k) {
  // grad[i] with i = (o, j, in) in a (outer, k, inner) layout lands at (o, indices[i], in) in grad_x.
  const int64_t n = layout.outer * k * layout.inner;
#pragma omp parallel for if (n > kParallelAbove)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o = i / (k * layout.inner), in = i % layout.inner;
    grad_x[(o * layout.size + indices[i]) * layout.inner + in] = grad[i];
  }
}

// topk order: larger first (or smaller first), NaN counted as larger than every number.
template <typename T>
bool comes_before(bool largest, T a, T b) {
  if (largest) return (is_nan_value(a) && !is_nan_value(b)) || a > b;
  return (!is_nan_value(a) && is_nan_value(b)) || a < b;
}

// Elements of all rows above which the rows are shared among threads: an element costs about log2(k)
// comparisons, several times the light work of kParallelAbove.
constexpr int64_t kParallelAboveTopkElements = 8192;

template <typename T>
void topk_loop(const T* x, int64_t rows, int64_t n, int64_t k, bool largest, T* values, int64_t* indices) {
#pragma omp parallel for if (rows > 1 && rows * n > kParallelAboveTopkElements)
  for (int64_t row = 0; row < rows; ++row) {
    const T* in = x + row * n;
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), int64_t{0});
    // Equal values fall back to the index, a strict total order: the result is the stable sort's prefix,
    // which is what the CUDA radix sort (stable) produces too. Any selection then gives the same k, so the
    // k first are found in linear time (nth_element) and only they are sorted, rather than kept in a heap
    // through the whole row (partial_sort).
    const auto before = [&](int64_t i, int64_t j) {
      if (comes_before(largest, in[i], in[j])) return true;
      if (comes_before(largest, in[j], in[i])) return false;
      return i < j;
    };
    if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
    std::sort(order.begin(), order.begin() + k, before);
    for (int64_t j = 0; j < k; ++j) {
      values[row * k + j] = in[order[j]];
      indices[row * k + j] = order[j];
    }
  }
}

}  // namespace

void extremum_rows_cpu(Extremum kind, const Tensor& x, const RowLayout& layout, const Tensor& values,
                       const Tensor& indices) {
  MINIDET_DISPATCH_NUMERIC(x.dtype(), "max/min", [&] {
    extremum_rows_loop<scalar_t>(kind, x.data<scalar_t>(), layout, values.data<scalar_t>(),
                                 indices.data<int64_t>());
  });
}

void scatter_rows_cpu(const Tensor& grad_x, const RowLayout& layout, const Tensor& grad, const Tensor& indices,
                      int64_t k) {
  MINIDET_DISPATCH_FLOATING(grad_x.dtype(), "max/min/topk backward", [&] {
    scatter_rows_loop<scalar_t>(grad_x.data<scalar_t>(), layout, grad.data<scalar_t>(), indices.data<int64_t>(), k);
  });
}

void topk_last_dim_cpu(const Tensor& x, int64_t k, bool largest, const Tensor& values, const Tensor& indices) {
  const int64_t n = x.size(-1), rows = x.numel() / n;
  MINIDET_DISPATCH_NUMERIC(x.dtype(), "topk", [&] {
    topk_loop<scalar_t>(x.data<scalar_t>(), rows, n, k, largest, values.data<scalar_t>(), indices.data<int64_t>());
  });
}

}  // namespace minidet::ops::detail
