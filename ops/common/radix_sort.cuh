// CUB's radix sort of (key, value) pairs on minidet's stream, for the CUDA kernels that order their work
// (RoIAlign's sorted terms and its RoIs' locality order). CUB's LSD radix sort is stable: equal keys keep
// their input order, which the deterministic paths rely on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "core/factories.h"

namespace minidet::ops::detail {

// Sorts n pairs by the bits of their keys that a key up to `largest_key` can set (fewer bits, fewer passes);
// the sorted pairs are keys.Current() and values.Current() afterwards. CUB's scratch comes from the caching
// allocator, so a warm pool makes no cudaMalloc and the sort can be captured in a CUDA graph.
template <typename Key, typename Value>
void radix_sort_pairs(cub::DoubleBuffer<Key>& keys, cub::DoubleBuffer<Value>& values, int64_t n, uint64_t largest_key,
                      const Device& device) {
  MINIDET_CHECK(n >= 0 && n <= INT32_MAX, "radix_sort_pairs: ", n, " pairs exceed CUB's int count");
  int end_bit = 1;
  while (end_bit < int(8 * sizeof(Key)) && (largest_key >> end_bit) != 0) ++end_bit;
  const cudaStream_t stream = cuda::current_stream();
  size_t temp_bytes = 0;
  MINIDET_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, values, int(n), 0, end_bit, stream));
  const Tensor temp = empty({int64_t(temp_bytes) + 1}, TensorOptions(kUInt8, device));
  MINIDET_CUDA_CHECK(
      cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, keys, values, int(n), 0, end_bit, stream));
}

}  // namespace minidet::ops::detail
