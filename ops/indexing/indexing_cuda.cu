// CUDA kernels for take / scatter_add along a dim and for where, with the same semantics as
// indexing_cpu.cpp (the geometry is explained in indexing_kernels.h).
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/strided_indexer.h"
#include "ops/indexing/indexing_kernels.h"

namespace minidet::ops::detail {
namespace {

__device__ __forceinline__ int64_t index_offset(const AlongDim& g, int64_t o, int64_t i, int64_t r) {
  return o * g.index_stride_outer + i * g.index_stride_count + r * g.index_stride_inner;
}

// One thread per output element e = (o, i, r) in row-major order.
template <typename T>
__global__ void take_kernel(int64_t n, AlongDim g, T* out, const T* x, const int64_t* index) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t r = e % g.inner, row = e / g.inner;
    const int64_t i = row % g.count, o = row / g.count;
    out[e] = x[(o * g.size + index[index_offset(g, o, i, r)]) * g.inner + r];
  }
}

// Default backward: one thread per source element, atomicAdd into its destination. Fast, but threads that
// share a destination land in a different order each run, so the last bits may differ.
template <typename T>
__global__ void scatter_add_atomic_kernel(int64_t n, AlongDim g, T* grad_x, const T* grad_out, const int64_t* index) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t r = e % g.inner, row = e / g.inner;
    const int64_t i = row % g.count, o = row / g.count;
    atomicAdd(&grad_x[(o * g.size + index[index_offset(g, o, i, r)]) * g.inner + r], grad_out[e]);
  }
}

// Deterministic backward: one thread per line (o, r). Only line (o, r) ever writes grad_x[o, :, r], so no
// atomics are needed, and each thread adds its sources in increasing i: the CPU's order, the CPU's bits.
// Neighbouring threads take neighbouring r, so their reads and writes are coalesced. Parallelism is
// outer * inner (a 1-D index_select of a (V, D) table gets D threads), the price of the fixed order.
template <typename T>
__global__ void scatter_add_lines_kernel(int64_t lines, AlongDim g, T* grad_x, const T* grad_out,
                                         const int64_t* index) {
  MINIDET_KERNEL_LOOP(line, lines) {
    const int64_t o = line / g.inner, r = line % g.inner;
    T* grad_x_line = grad_x + o * g.size * g.inner + r;
    const T* grad_out_line = grad_out + o * g.count * g.inner + r;
    for (int64_t i = 0; i < g.count; ++i)
      grad_x_line[index[index_offset(g, o, i, r)] * g.inner] += grad_out_line[i * g.inner];
  }
}

template <typename T>
__global__ void where_kernel_cuda(int64_t n, StridedIndexer<4> ix, T* out, const bool* cond, const T* a,
                                  const T* b) {
  MINIDET_KERNEL_LOOP(e, n) {
    int64_t off[4];
    ix.offsets(e, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

}  // namespace

void take_along_dim_cuda(const Tensor& out, const Tensor& x, const Tensor& index, const AlongDim& geometry) {
  cuda::DeviceGuard guard(out.device());
  const int64_t n = geometry.out_numel();
  MINIDET_DISPATCH_ALL(out.dtype(), "take_along_dim", [&] {
    take_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, geometry, out.data<scalar_t>(), x.data<scalar_t>(), index.data<int64_t>());
    MINIDET_CUDA_LAUNCH_CHECK("take_kernel");
  });
}

void scatter_add_along_dim_cuda(const Tensor& grad_x, const Tensor& grad_out, const Tensor& index,
                                const AlongDim& geometry, bool deterministic) {
  cuda::DeviceGuard guard(grad_x.device());
  MINIDET_DISPATCH_FLOATING(grad_x.dtype(), "scatter_add_along_dim", [&] {
    if (deterministic) {
      const int64_t lines = geometry.outer * geometry.inner;
      scatter_add_lines_kernel<scalar_t><<<cuda::blocks_for(lines), cuda::kThreadsPerBlock, 0,
                                           cuda::current_stream()>>>(
          lines, geometry, grad_x.data<scalar_t>(), grad_out.data<scalar_t>(), index.data<int64_t>());
      MINIDET_CUDA_LAUNCH_CHECK("scatter_add_lines_kernel");
    } else {
      const int64_t n = geometry.out_numel();
      scatter_add_atomic_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0,
                                            cuda::current_stream()>>>(
          n, geometry, grad_x.data<scalar_t>(), grad_out.data<scalar_t>(), index.data<int64_t>());
      MINIDET_CUDA_LAUNCH_CHECK("scatter_add_atomic_kernel");
    }
  });
}

void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  cuda::DeviceGuard guard(out.device());
  const Shape* strides[4] = {&out.strides(), &cond.strides(), &a.strides(), &b.strides()};
  const StridedIndexer<4> ix = make_indexer<4>(out.sizes(), strides);
  const int64_t n = out.numel();
  MINIDET_DISPATCH_ALL(out.dtype(), "where", [&] {
    where_kernel_cuda<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, ix, out.data<scalar_t>(), cond.data<bool>(), a.data<scalar_t>(), b.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("where_kernel_cuda");
  });
}

}  // namespace minidet::ops::detail
