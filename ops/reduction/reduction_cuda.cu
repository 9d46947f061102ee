// CUDA kernels for max/min/argmax, their scatter backward, and topk (on top of sort). Same semantics as
// reduction_cpu.cpp.
#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/reduction/reduction_kernels.h"
#include "ops/sort/sort_kernels.h"

namespace minidet::ops::detail {
namespace {

constexpr int kRowThreads = 256;

// One block per row (grid-stride over rows). Thread t scans elements t, t + 256, ... keeping the first best
// one it sees; then a fixed tree merges the 256 candidates. A merge prefers the better value and, between
// equal values, the smaller index, so the block returns the first occurrence, exactly like the CPU scan.
template <typename T>
__global__ void extremum_rows_kernel_cuda(Extremum kind, const T* x, RowLayout layout, T* values,
                                          int64_t* indices) {
  __shared__ T best[kRowThreads];
  __shared__ int64_t best_index[kRowThreads];  // -1: this thread saw no element
  const int t = threadIdx.x;
  for (int64_t row = blockIdx.x; row < layout.rows(); row += gridDim.x) {
    const T* in = x + layout.base(row);
    T v_best = T();
    int64_t i_best = -1;
    for (int64_t k = t; k < layout.size; k += blockDim.x) {
      const T v = in[k * layout.inner];
      if (i_best < 0 || beats(kind, v, v_best)) {
        v_best = v;
        i_best = k;
      }
    }
    best[t] = v_best;
    best_index[t] = i_best;
    __syncthreads();
    for (int width = blockDim.x / 2; width > 0; width /= 2) {
      if (t < width && best_index[t + width] >= 0) {
        const T other = best[t + width];
        const int64_t other_index = best_index[t + width];
        const bool take = best_index[t] < 0 || beats(kind, other, best[t]) ||
                          (!beats(kind, best[t], other) && other_index < best_index[t]);
        if (take) {
          best[t] = other;
          best_index[t] = other_index;
        }
      }
      __syncthreads();
    }
    if (t == 0) {
      values[row] = best[0];
      indices[row] = best_index[0];
    }
    __syncthreads();  // best[] is reused by the next row
  }
}

// One thread per picked element: indices within a row are distinct, so no two threads write one place.
template <typename T>
__global__ void scatter_rows_kernel_cuda(int64_t n, T* grad_x, RowLayout layout, const T* grad,
                                         const int64_t* indices, int64_t k) {
  MINIDET_KERNEL_LOOP(i, n) {
    const int64_t o = i / (k * layout.inner), in = i % layout.inner;
    grad_x[(o * layout.size + indices[i]) * layout.inner + in] = grad[i];
  }
}

}  // namespace

void extremum_rows_cuda(Extremum kind, const Tensor& x, const RowLayout& layout, const Tensor& values,
                        const Tensor& indices) {
  cuda::DeviceGuard guard(x.device());
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(layout.rows(), cuda::kMaxBlocks));
  MINIDET_DISPATCH_NUMERIC(x.dtype(), "max/min", [&] {
    extremum_rows_kernel_cuda<scalar_t><<<blocks, kRowThreads, 0, cuda::current_stream()>>>(
        kind, x.data<scalar_t>(), layout, values.data<scalar_t>(), indices.data<int64_t>());
    MINIDET_CUDA_LAUNCH_CHECK("extremum_rows_kernel_cuda");
  });
}

void scatter_rows_cuda(const Tensor& grad_x, const RowLayout& layout, const Tensor& grad, const Tensor& indices,
                       int64_t k) {
  cuda::DeviceGuard guard(grad_x.device());
  const int64_t n = grad.numel();
  MINIDET_DISPATCH_FLOATING(grad_x.dtype(), "max/min/topk backward", [&] {
    scatter_rows_kernel_cuda<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, grad_x.data<scalar_t>(), layout, grad.data<scalar_t>(), indices.data<int64_t>(), k);
    MINIDET_CUDA_LAUNCH_CHECK("scatter_rows_kernel_cuda");
  });
}

// topk on CUDA sorts every row completely (sort's stable CUB sort, which orders NaN and -0.0 exactly as the
// CPU does; ops/sort/sort_cuda.cu), then keeps the first k of each.
void topk_last_dim_cuda(const Tensor& x, int64_t k, bool largest, const Tensor& values, const Tensor& indices) {
  const int64_t n = x.size(-1), rows = x.numel() / n;
  if (k == n) {  // every element: the sort writes the outputs themselves
    sort_rows_cuda(x, row_layout({rows, n}, 1), /*descending=*/largest, values, indices);
    return;
  }
  Tensor sorted = empty({rows, n}, x.options());
  Tensor sorted_positions = empty({rows, n}, TensorOptions(kInt64, x.device()));
  sort_rows_cuda(x, row_layout({rows, n}, 1), /*descending=*/largest, sorted, sorted_positions);
  NoGradGuard raw;
  values.copy_(sorted.narrow(1, 0, k));
  indices.copy_(sorted_positions.narrow(1, 0, k));
}

}  // namespace minidet::ops::detail
