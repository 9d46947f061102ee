// for_each_run: how the CPU's elementwise loops (copy, fill, add_into, the unary and binary ops) walk a
// StridedIndexer. Only CPU sources include it: its runs are shared among threads where OpenMP is on (the
// library's CPU files); elsewhere the pragma would only draw an unknown-pragma warning.
#pragma once

#include <cstdint>

#include "core/strided_indexer.h"

namespace minidet {

// The CPU loops' walk: the n elements as runs along the innermost (merged) dim, at most kRunLength long, so
// the index arithmetic (a division per dim) runs once per run instead of once per element, and the loop
// body is a plain strided walk. Runs are independent, so they are shared among OpenMP threads when n is
// above parallel_above. run(first, steps, length) gets the operands' offsets of the run's first element and
// their strides along the run.
constexpr int64_t kRunLength = 4096;

template <int N, typename Run>
void for_each_run(const StridedIndexer<N>& ix, int64_t n, int64_t parallel_above, Run&& run) {
  if (n <= 0) return;
  const int64_t inner = ix.ndim ? ix.sizes[ix.ndim - 1] : 1;
  int64_t steps[N];
  for (int a = 0; a < N; ++a) steps[a] = ix.ndim ? ix.strides[a][ix.ndim - 1] : 0;
  const int64_t runs_per_row = (inner + kRunLength - 1) / kRunLength, runs = n / inner * runs_per_row;
#pragma omp parallel for if (n > parallel_above)
  for (int64_t r = 0; r < runs; ++r) {
    const int64_t start = (r % runs_per_row) * kRunLength;
    const int64_t length = inner - start < kRunLength ? inner - start : kRunLength;
    int64_t first[N];
    ix.offsets(r / runs_per_row * inner + start, first);
    run(static_cast<const int64_t*>(first), static_cast<const int64_t*>(steps), length);
  }
}

}  // namespace minidet
