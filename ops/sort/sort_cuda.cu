// CUDA sort: canonical keys -> CUB stable radix sort of (key, position) pairs -> values gathered from x.
//
//   1. sort_keys_kernel   keys[r, k] = canonical(x[r, k]), positions[r, k] = k      (rows made contiguous)
//   2. CUB                one row: DeviceRadixSort; several: DeviceSegmentedSort (one segment per row);
//                         both stable, on (key, int32 position) pairs
//   3. sort_gather_kernel values[r, k] = x[r, p], indices[r, k] = p  for p = the k-th sorted position
//
// Why canonical keys: a radix sort orders floats by their bits (sign flipped for positives, all bits flipped
// for negatives). That puts a NaN with its sign bit set below -inf and orders NaNs by payload, while the CPU
// counts every NaN as one value above +inf (sort.h). Making every NaN the one +NaN (whose bits sort above
// +inf) and every -0.0 a +0.0 gives the radix sort exactly the CPU's order, ties included. The values are
// gathered from x afterwards, so the output still holds the input's own -0.0s and NaNs.
#include <climits>
#include <limits>
#include <type_traits>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/sort/sort_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
__device__ T canonical_key(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (v != v) return std::numeric_limits<T>::quiet_NaN();  // constexpr: fine in device code
    if (v == T(0)) return T(0);                               // -0.0 -> +0.0
  }
  return v;
}

template <typename T>
__global__ void sort_keys_kernel(int64_t total, const T* x, RowLayout layout, T* keys, int32_t* positions) {
  MINIDET_KERNEL_LOOP(i, total) {
    const int64_t row = i / layout.size, k = i % layout.size;
    keys[i] = canonical_key(x[layout.base(row) + k * layout.inner]);
    positions[i] = static_cast<int32_t>(k);
  }
}

// Segment r of the (rows, n) keys is [offsets[r], offsets[r + 1]).
__global__ void row_offsets_kernel(int64_t rows, int64_t n, int64_t* offsets) {
  MINIDET_KERNEL_LOOP(r, rows + 1) { offsets[r] = r * n; }
}

template <typename T>
__global__ void sort_gather_kernel(int64_t total, const T* x, RowLayout layout, const int32_t* sorted_positions,
                                   T* values, int64_t* indices) {
  MINIDET_KERNEL_LOOP(i, total) {
    const int64_t row = i / layout.size, k = i % layout.size, base = layout.base(row);
    const int64_t p = sorted_positions[i];
    values[base + k * layout.inner] = x[base + p * layout.inner];
    indices[base + k * layout.inner] = p;
  }
}

}  // namespace

void sort_rows_cuda(const Tensor& x, const RowLayout& layout, bool descending, const Tensor& values,
                    const Tensor& indices) {
  cuda::DeviceGuard guard(x.device());
  const int64_t total = x.numel(), rows = layout.rows(), n = layout.size;
  MINIDET_CHECK(n <= INT_MAX, "sort: CUDA sorts rows of at most ", INT_MAX, " elements, got ", n);
  cudaStream_t stream = cuda::current_stream();
  // Two buffers each for keys and positions: CUB's DoubleBuffer form ping-pongs between them instead of
  // asking for that much more scratch; afterwards Current() names the one holding the sorted data.
  Tensor key_buffers = empty({2, total}, x.options());
  // minidet has no int32 dtype: the int32 positions live in raw bytes (the allocator aligns every block).
  Tensor position_buffers = empty({2 * total * int64_t(sizeof(int32_t))}, TensorOptions(kUInt8, x.device()));
  MINIDET_DISPATCH_NUMERIC(x.dtype(), "sort", [&] {
    scalar_t* keys0 = key_buffers.data<scalar_t>();
    int32_t* positions0 = static_cast<int32_t*>(position_buffers.raw_data());
    sort_keys_kernel<scalar_t><<<cuda::blocks_for(total), cuda::kThreadsPerBlock, 0, stream>>>(
        total, x.data<scalar_t>(), layout, keys0, positions0);
    MINIDET_CUDA_LAUNCH_CHECK("sort_keys_kernel");
    cub::DoubleBuffer<scalar_t> keys(keys0, keys0 + total);
    cub::DoubleBuffer<int32_t> positions(positions0, positions0 + total);
    Tensor offsets;
    if (rows > 1) {
      offsets = empty({rows + 1}, TensorOptions(kInt64, x.device()));
      row_offsets_kernel<<<cuda::blocks_for(rows + 1), cuda::kThreadsPerBlock, 0, stream>>>(
          rows, n, offsets.data<int64_t>());
      MINIDET_CUDA_LAUNCH_CHECK("row_offsets_kernel");
    }
    const int64_t* begin = rows > 1 ? offsets.data<int64_t>() : nullptr;
    auto run_cub = [&](void* temp, size_t& temp_bytes) -> cudaError_t {
      if (rows == 1)
        return descending ? cub::DeviceRadixSort::SortPairsDescending(temp, temp_bytes, keys, positions, n, 0,
                                                                      int(sizeof(scalar_t) * 8), stream)
                          : cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, positions, n, 0,
                                                            int(sizeof(scalar_t) * 8), stream);
      return descending ? cub::DeviceSegmentedSort::StableSortPairsDescending(temp, temp_bytes, keys, positions,
                                                                              total, rows, begin, begin + 1, stream)
                        : cub::DeviceSegmentedSort::StableSortPairs(temp, temp_bytes, keys, positions, total, rows,
                                                                    begin, begin + 1, stream);
    };
    size_t temp_bytes = 0;
    MINIDET_CUDA_CHECK(run_cub(nullptr, temp_bytes));
    // Scratch from the caching allocator: no cudaMalloc once the pool is warm, returned when `temp` dies.
    Tensor temp = empty({static_cast<int64_t>(temp_bytes) + 1}, TensorOptions(kUInt8, x.device()));
    MINIDET_CUDA_CHECK(run_cub(temp.raw_data(), temp_bytes));
    sort_gather_kernel<scalar_t><<<cuda::blocks_for(total), cuda::kThreadsPerBlock, 0, stream>>>(
        total, x.data<scalar_t>(), layout, positions.Current(), values.data<scalar_t>(), indices.data<int64_t>());
    MINIDET_CUDA_LAUNCH_CHECK("sort_gather_kernel");
  });
}

}  // namespace minidet::ops::detail
