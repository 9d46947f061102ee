// CUDA sort: ordered integer keys -> CUB stable sort of (key, position) pairs -> values gathered from x.
//
//   1. sort_keys_kernel   keys[r, k] = sort_key(x[r, k]), positions[r, k] = k       (rows made contiguous)
//   2. CUB                one row: DeviceRadixSort; several: DeviceSegmentedSort (one segment per row);
//                         both stable, on (key, int32 position) pairs
//   3. sort_gather_kernel values[r, k] = x[r, p], indices[r, k] = p  for p = the k-th sorted position
//
// Rows of at most 4,096 elements (the detector's: 1,000 proposals, 2,304 anchors per image) skip all three
// steps: one thread block per row loads the keys, sorts them in shared memory (cub::BlockRadixSort, stable)
// and writes the values and indices, one kernel in all. Padding past the row's end gets the key that sorts
// last (largest ascending, smallest descending) and a position past every real one, so stability keeps it
// behind any real element with the same key; it is never written out.
//
// Why integer keys: CUB orders floats by their bits (a radix sort) or by operator< (the merge sorts it uses
// for short segments). The bits put a NaN with its sign bit set below -inf and order NaNs by payload;
// operator< is no order at all once a NaN is in. sort_key maps each element to an unsigned integer whose
// plain order is the CPU's (sort.h: NaN largest and all NaNs equal, -0.0 == +0.0), so both CUB paths, and
// any future one, give exactly the CPU's stable order. The values are gathered from x afterwards, so the
// output still holds the input's own -0.0s and NaNs.
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/sort/sort_kernels.h"

namespace minidet::ops::detail {
namespace {

// The unsigned integer whose order is sort.h's order of T: sorting these keys as plain unsigned numbers, by
// any algorithm (CUB radix-sorts long segments and merge-sorts short ones), gives the CPU's order exactly.
template <typename T> struct SortKey;
template <> struct SortKey<float> { using type = uint32_t; };
template <> struct SortKey<double> { using type = uint64_t; };
template <> struct SortKey<int64_t> { using type = uint64_t; };
template <> struct SortKey<uint8_t> { using type = uint8_t; };

template <typename T>
__device__ typename SortKey<T>::type sort_key(T v) {
  using Key = typename SortKey<T>::type;
  constexpr Key sign_bit = Key(1) << (8 * sizeof(Key) - 1);
  if constexpr (std::is_floating_point_v<T>) {
    // Every NaN becomes the one +NaN and -0.0 becomes +0.0 (they are equal in sort.h's order). Then the usual
    // float-to-ordered-integer map: a positive float's bits already order like unsigned integers once the
    // sign bit is set above every negative; a negative float's bits order backwards, so flip them all.
    // +NaN's bits lie above +inf's, so NaN ends up largest.
    if (v != v) v = std::numeric_limits<T>::quiet_NaN();  // constexpr: fine in device code
    if (v == T(0)) v = T(0);
    Key bits;
    memcpy(&bits, &v, sizeof bits);
    return (bits & sign_bit) ? ~bits : (bits | sign_bit);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<Key>(v) ^ sign_bit;  // two's complement: flipping the sign bit orders like unsigned
  } else {
    return v;
  }
}

template <typename T>
__global__ void sort_keys_kernel(int64_t total, const T* x, RowLayout layout, typename SortKey<T>::type* keys,
                                 int32_t* positions) {
  MINIDET_KERNEL_LOOP(i, total) {
    const int64_t row = i / layout.size, k = i % layout.size;
    keys[i] = sort_key(x[layout.base(row) + k * layout.inner]);
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

// One block per row; thread t holds the row's elements t*kItems .. t*kItems + kItems - 1 (CUB's blocked
// arrangement), so the block's item order is the row's order and the stable sort keeps ties in it.
template <typename T, int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads)
    block_sort_rows_kernel(const T* x, RowLayout layout, bool descending, T* values, int64_t* indices) {
  using Key = typename SortKey<T>::type;
  using BlockSort = cub::BlockRadixSort<Key, kThreads, kItems, int32_t>;
  __shared__ typename BlockSort::TempStorage temp;
  const int64_t base = layout.base(blockIdx.x), n = layout.size, inner = layout.inner;
  const Key padding = descending ? Key(0) : static_cast<Key>(~Key(0));
  Key keys[kItems];
  int32_t positions[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int32_t k = threadIdx.x * kItems + i;
    keys[i] = k < n ? sort_key(x[base + k * inner]) : padding;
    positions[i] = k;
  }
  if (descending)
    BlockSort(temp).SortDescending(keys, positions);
  else
    BlockSort(temp).Sort(keys, positions);
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t k = threadIdx.x * kItems + i;
    if (k >= n) continue;
    values[base + k * inner] = x[base + int64_t(positions[i]) * inner];
    indices[base + k * inner] = positions[i];
  }
}

constexpr int64_t kBlockSortMax = 4096;

// True when it sorted: rows of at most kBlockSortMax elements, one block each.
template <typename T>
bool block_sort_rows(const Tensor& x, const RowLayout& layout, bool descending, const Tensor& values,
                     const Tensor& indices, cudaStream_t stream) {
  const int64_t n = layout.size, rows = layout.rows();
  if (n > kBlockSortMax || rows > INT_MAX) return false;
  const unsigned blocks = static_cast<unsigned>(rows);
  if (n <= 512) {
    block_sort_rows_kernel<T, 128, 4><<<blocks, 128, 0, stream>>>(x.data<T>(), layout, descending, values.data<T>(),
                                                                  indices.data<int64_t>());
  } else {
    block_sort_rows_kernel<T, 256, 16><<<blocks, 256, 0, stream>>>(x.data<T>(), layout, descending,
                                                                   values.data<T>(), indices.data<int64_t>());
  }
  MINIDET_CUDA_LAUNCH_CHECK("block_sort_rows_kernel");
  return true;
}

}  // namespace

void sort_rows_cuda(const Tensor& x, const RowLayout& layout, bool descending, const Tensor& values,
                    const Tensor& indices) {
  cuda::DeviceGuard guard(x.device());
  const int64_t total = x.numel(), rows = layout.rows(), n = layout.size;
  MINIDET_CHECK(n <= INT_MAX, "sort: CUDA sorts rows of at most ", INT_MAX, " elements, got ", n);
  cudaStream_t stream = cuda::current_stream();
  if (total == 0) return;
  bool sorted = false;
  MINIDET_DISPATCH_NUMERIC(x.dtype(), "sort", [&] {
    sorted = block_sort_rows<scalar_t>(x, layout, descending, values, indices, stream);
  });
  if (sorted) return;
  // Two buffers each for keys and positions: CUB's DoubleBuffer form ping-pongs between them instead of
  // asking for that much more scratch; afterwards Current() names the one holding the sorted data.
  // Keys are unsigned integers of x's element size; minidet has no such dtypes, so they live in x's dtype's
  // bytes (the same size) and are used through a cast.
  Tensor key_buffers = empty({2, total}, x.options());
  // minidet has no int32 dtype: the int32 positions live in raw bytes (the allocator aligns every block).
  Tensor position_buffers = empty({2 * total * int64_t(sizeof(int32_t))}, TensorOptions(kUInt8, x.device()));
  MINIDET_DISPATCH_NUMERIC(x.dtype(), "sort", [&] {
    using Key = typename SortKey<scalar_t>::type;
    static_assert(sizeof(Key) == sizeof(scalar_t), "a sort key has its value's size");
    Key* keys0 = static_cast<Key*>(key_buffers.raw_data());
    int32_t* positions0 = static_cast<int32_t*>(position_buffers.raw_data());
    sort_keys_kernel<scalar_t><<<cuda::blocks_for(total), cuda::kThreadsPerBlock, 0, stream>>>(
        total, x.data<scalar_t>(), layout, keys0, positions0);
    MINIDET_CUDA_LAUNCH_CHECK("sort_keys_kernel");
    cub::DoubleBuffer<Key> keys(keys0, keys0 + total);
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
                                                                      int(sizeof(Key) * 8), stream)
                          : cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, positions, n, 0,
                                                            int(sizeof(Key) * 8), stream);
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
