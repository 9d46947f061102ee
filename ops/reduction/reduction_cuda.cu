// CUDA kernels for max/min/argmax, their scatter backward, and topk. Same semantics as reduction_cpu.cpp.
#include <climits>
#include <limits>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/reduction/reduction_kernels.h"

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

// Each row's positions 0..n-1: the values the radix sort carries along with the keys.
__global__ void row_positions_kernel(int64_t total, int64_t n, int64_t* out) {
  MINIDET_KERNEL_LOOP(i, total) { out[i] = i % n; }
}

// topk's sort keys: x with every NaN replaced by the one canonical +NaN. CUB's radix sort orders floats by
// their bits (flipped so that negative numbers sort below positive ones), which puts a NaN with the sign bit
// set (-NaN, e.g. from -(NaN) or some inf - inf) below -inf, and orders NaNs among themselves by payload. The
// CPU treats every NaN as larger than every number and all NaNs as equal (input order kept), so on the GPU
// every NaN must be the same +NaN, which sorts above +inf and ties with the others.
template <typename T>
__global__ void canonical_nan_kernel(int64_t n, const T* x, T* keys) {
  MINIDET_KERNEL_LOOP(i, n) {
    const T v = x[i];
    keys[i] = v != v ? std::numeric_limits<T>::quiet_NaN() : v;  // constexpr: fine in device code
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

// topk on CUDA sorts every row completely with CUB's segmented radix sort (one segment per row), then keeps
// the first k of each. Radix sort is stable, so equal values keep their input order, as on the CPU; it
// orders floats by their bits, which puts +NaN above +inf but -NaN below -inf, so floating keys are first
// copied with every NaN made one canonical +NaN (canonical_nan_kernel): every NaN then counts as largest and
// ties with the other NaNs, as on the CPU.
void topk_last_dim_cuda(const Tensor& x, int64_t k, bool largest, const Tensor& values, const Tensor& indices) {
  cuda::DeviceGuard guard(x.device());
  const int64_t n = x.size(-1), total = x.numel(), rows = total / n;
  MINIDET_CHECK(total <= INT_MAX, "topk: CUDA topk sorts at most ", INT_MAX, " elements, got ", total);
  const TensorOptions index_options(kInt64, x.device());
  Tensor positions = empty({total}, index_options);
  row_positions_kernel<<<cuda::blocks_for(total), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
      total, n, positions.data<int64_t>());
  MINIDET_CUDA_LAUNCH_CHECK("row_positions_kernel");
  // Segment r is [offsets[r], offsets[r + 1]).
  const Tensor offsets = arange(0, static_cast<double>((rows + 1) * n), static_cast<double>(n), kInt64).to(x.device());
  Tensor sorted = empty({rows, n}, x.options());
  Tensor sorted_positions = empty({rows, n}, index_options);
  // The sort keys: x itself, or for floats a copy with every NaN made the canonical +NaN.
  Tensor keys = x;
  if (is_floating(x.dtype())) {
    keys = empty({rows, n}, x.options());
    MINIDET_DISPATCH_FLOATING(x.dtype(), "topk", [&] {
      canonical_nan_kernel<scalar_t><<<cuda::blocks_for(total), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          total, x.data<scalar_t>(), keys.data<scalar_t>());
      MINIDET_CUDA_LAUNCH_CHECK("canonical_nan_kernel");
    });
  }
  MINIDET_DISPATCH_NUMERIC(x.dtype(), "topk", [&] {
    const scalar_t* keys_in = keys.data<scalar_t>();
    scalar_t* keys_out = sorted.data<scalar_t>();
    const int64_t* values_in = positions.data<int64_t>();
    int64_t* values_out = sorted_positions.data<int64_t>();
    const int64_t* begin = offsets.data<int64_t>();
    const int items = static_cast<int>(total), segments = static_cast<int>(rows);
    auto sort = [&](void* temp, size_t& temp_bytes) {
      return largest ? cub::DeviceSegmentedRadixSort::SortPairsDescending(
                           temp, temp_bytes, keys_in, keys_out, values_in, values_out, items, segments, begin,
                           begin + 1, 0, int(sizeof(scalar_t) * 8), cuda::current_stream())
                     : cub::DeviceSegmentedRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, values_in,
                                                                values_out, items, segments, begin, begin + 1, 0,
                                                                int(sizeof(scalar_t) * 8), cuda::current_stream());
    };
    size_t temp_bytes = 0;
    MINIDET_CUDA_CHECK(sort(nullptr, temp_bytes));
    // Scratch from the caching allocator, freed (returned to its pool) when `temp` goes out of scope.
    Tensor temp = empty({static_cast<int64_t>(temp_bytes) + 1}, TensorOptions(kUInt8, x.device()));
    MINIDET_CUDA_CHECK(sort(temp.raw_data(), temp_bytes));
  });
  NoGradGuard raw;
  values.copy_(sorted.narrow(1, 0, k));
  indices.copy_(sorted_positions.narrow(1, 0, k));
}

}  // namespace minidet::ops::detail
