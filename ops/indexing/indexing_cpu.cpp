// CPU kernels for take / scatter_add along a dim and for where (the geometry is explained in
// indexing_kernels.h). Loops sit in templates outside the dispatch lambdas so that `#pragma omp` can apply.
#include "core/strided_indexer.h"
#include "ops/common/parallel.h"
#include "ops/indexing/indexing_kernels.h"

namespace minidet::ops::detail {
namespace {

inline int64_t index_offset(const AlongDim& g, int64_t o, int64_t i, int64_t r) {
  return o * g.index_stride_outer + i * g.index_stride_count + r * g.index_stride_inner;
}

template <typename T>
void take_loop(T* out, const T* x, const int64_t* index, const AlongDim g) {
  const int64_t rows = g.outer * g.count;  // one output row (o, i) = `inner` consecutive elements
#pragma omp parallel for if (rows * g.inner > kParallelAbove)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t o = row / g.count, i = row % g.count;
    const T* x_block = x + o * g.size * g.inner;
    T* out_row = out + row * g.inner;
    for (int64_t r = 0; r < g.inner; ++r) out_row[r] = x_block[index[index_offset(g, o, i, r)] * g.inner + r];
  }
}

// Parallel over o only: the blocks grad_x[o] are disjoint, and inside one block every destination receives
// its sources in increasing i, the order the CUDA deterministic kernel uses too.
template <typename T>
void scatter_add_loop(T* grad_x, const T* grad_out, const int64_t* index, const AlongDim g) {
#pragma omp parallel for if (g.outer > 1 && g.outer * g.count * g.inner > kParallelAbove)
  for (int64_t o = 0; o < g.outer; ++o) {
    T* grad_x_block = grad_x + o * g.size * g.inner;
    const T* grad_out_block = grad_out + o * g.count * g.inner;
    for (int64_t i = 0; i < g.count; ++i)
      for (int64_t r = 0; r < g.inner; ++r)
        grad_x_block[index[index_offset(g, o, i, r)] * g.inner + r] += grad_out_block[i * g.inner + r];
  }
}

template <typename T>
void where_loop(T* out, const bool* cond, const T* a, const T* b, const StridedIndexer<4>& ix, int64_t n) {
#pragma omp parallel for if (n > kParallelAbove)
  for (int64_t e = 0; e < n; ++e) {
    int64_t off[4];
    ix.offsets(e, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

}  // namespace

void take_along_dim_cpu(const Tensor& out, const Tensor& x, const Tensor& index, const AlongDim& geometry) {
  MINIDET_DISPATCH_ALL(out.dtype(), "take_along_dim", [&] {
    take_loop<scalar_t>(out.data<scalar_t>(), x.data<scalar_t>(), index.data<int64_t>(), geometry);
  });
}

void scatter_add_along_dim_cpu(const Tensor& grad_x, const Tensor& grad_out, const Tensor& index,
                               const AlongDim& geometry) {
  MINIDET_DISPATCH_FLOATING(grad_x.dtype(), "scatter_add_along_dim", [&] {
    scatter_add_loop<scalar_t>(grad_x.data<scalar_t>(), grad_out.data<scalar_t>(), index.data<int64_t>(), geometry);
  });
}

void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Shape* strides[4] = {&out.strides(), &cond.strides(), &a.strides(), &b.strides()};
  const StridedIndexer<4> ix = make_indexer<4>(out.sizes(), strides);
  MINIDET_DISPATCH_ALL(out.dtype(), "where", [&] {
    where_loop<scalar_t>(out.data<scalar_t>(), cond.data<bool>(), a.data<scalar_t>(), b.data<scalar_t>(), ix,
                         out.numel());
  });
}

}  // namespace minidet::ops::detail
