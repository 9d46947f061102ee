// CPU sort: each row copied out as (value, position) pairs, ordered by std::stable_sort, written back. Rows are
// independent, so they run in parallel (OpenMP) when there are several and enough work.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/sort/sort_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
void sort_rows_loop(const T* x, RowLayout layout, bool descending, T* values, int64_t* indices) {
  const int64_t rows = layout.rows(), n = layout.size, inner = layout.inner;
#pragma omp parallel for if (rows > 1 && rows * n > kParallelAbove)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t base = layout.base(row);
    std::vector<std::pair<T, int64_t>> row_pairs(n);
    for (int64_t k = 0; k < n; ++k) row_pairs[k] = {x[base + k * inner], k};
    auto begin = row_pairs.begin(), end = row_pairs.end();
    if constexpr (std::is_floating_point_v<T>) {
      // NaNs first move, in input order, to their end of the row (front when descending); the numbers left
      // then need only the plain < or >, which is the cheaper comparison for the sort proper.
      auto is_number = [](const std::pair<T, int64_t>& p) { return !std::isnan(p.first); };
      if (descending)
        begin = std::stable_partition(begin, end, [&](const auto& p) { return !is_number(p); });
      else
        end = std::stable_partition(begin, end, is_number);
    }
    if (descending)
      std::stable_sort(begin, end, [](const auto& a, const auto& b) { return a.first > b.first; });
    else
      std::stable_sort(begin, end, [](const auto& a, const auto& b) { return a.first < b.first; });
    for (int64_t k = 0; k < n; ++k) {
      values[base + k * inner] = row_pairs[k].first;
      indices[base + k * inner] = row_pairs[k].second;
    }
  }
}

}  // namespace

void sort_rows_cpu(const Tensor& x, const RowLayout& layout, bool descending, const Tensor& values,
                   const Tensor& indices) {
  MINIDET_DISPATCH_NUMERIC(x.dtype(), "sort", [&] {
    sort_rows_loop<scalar_t>(x.data<scalar_t>(), layout, descending, values.data<scalar_t>(),
                             indices.data<int64_t>());
  });
}

}  // namespace minidet::ops::detail
