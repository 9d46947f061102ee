// CUB's radix sort of (key, value) pairs on minidet's stream, for the CUDA kernels that order their work (the
// sorted terms of RoIAlign's and RoIPool's deterministic backwards, RoIAlign's locality order). CUB's LSD radix
// sort is stable: equal keys keep their input order, which the deterministic paths rely on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "core/factories.h"

namespace minidet::ops::detail {

// Sorts n pairs stably by bits [0, end_bit) of their keys (fewer bits, fewer passes; the higher bits ride
// along unsorted); the sorted pairs are keys.Current() and values.Current() afterwards. CUB's scratch comes
// from the caching allocator, so a warm pool makes no cudaMalloc and the sort can be captured in a CUDA graph.
template <typename Key, typename Value>
void radix_sort_pairs_on_bits(cub::DoubleBuffer<Key>& keys, cub::DoubleBuffer<Value>& values, int64_t n, int end_bit,
                              const Device& device) {
  MINIDET_CHECK(n >= 0 && n <= INT32_MAX, "radix_sort_pairs: ", n, " pairs exceed CUB's int count");
  MINIDET_CHECK(end_bit >= 1 && end_bit <= int(8 * sizeof(Key)), "radix_sort_pairs: ", end_bit, " bits of a ",
                8 * sizeof(Key), "-bit key");
  const cudaStream_t stream = cuda::current_stream();
  size_t temp_bytes = 0;
  MINIDET_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, values, int(n), 0, end_bit, stream));
  const Tensor temp = empty({int64_t(temp_bytes) + 1}, TensorOptions(kUInt8, device));
  MINIDET_CUDA_CHECK(
      cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, keys, values, int(n), 0, end_bit, stream));
}

// The number of low bits that hold every value up to `largest` (at least 1).
inline int bits_for(uint64_t largest) {
  int bits = 1;
  while (bits < 64 && (largest >> bits) != 0) ++bits;
  return bits;
}

// Sorts n pairs by all the bits a key up to `largest_key` can set.
template <typename Key, typename Value>
void radix_sort_pairs(cub::DoubleBuffer<Key>& keys, cub::DoubleBuffer<Value>& values, int64_t n, uint64_t largest_key,
                      const Device& device) {
  radix_sort_pairs_on_bits(keys, values, n, std::min(bits_for(largest_key), int(8 * sizeof(Key))), device);
}

}  // namespace minidet::ops::detail
