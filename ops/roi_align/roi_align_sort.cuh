// The two device-wide steps that the RoIAlign ops' deterministic input gradients share
// (roi_align_cuda_sorted.cu, ops/roi_align_rotated/roi_align_rotated_cuda.cu), both cub calls on the current
// stream: the scan that gives each RoI its first entry, and the stable radix sort that turns the listed
// entries into one run per input pixel, in the order they were listed.
#pragma once

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/factories.h"

namespace minidet::ops::detail {

// first[i] = counts[0] + ... + counts[i - 1]; int64 tensors of one length.
inline void exclusive_sum(const Tensor& counts, const Tensor& first) {
  const cudaStream_t stream = cuda::current_stream();
  size_t bytes = 0;
  MINIDET_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, counts.data<int64_t>(), first.data<int64_t>(),
                                                   counts.numel(), stream));
  Tensor temp = empty({static_cast<int64_t>(bytes) + 1}, TensorOptions(kUInt8, counts.device()));
  MINIDET_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.data<uint8_t>(), bytes, counts.data<int64_t>(),
                                                   first.data<int64_t>(), counts.numel(), stream));
}

struct SortedEntries {
  Tensor keys;   // ascending
  Tensor order;  // order[r]: the listed index of sorted entry r
};

// Sorts int64 keys in [0, max_key] with their listed indices 0..n-1. An LSD radix sort is stable: equal keys
// keep their listed order, whatever the thread schedule. Only the bits that max_key needs are sorted.
inline SortedEntries stable_sort_entries(const Tensor& keys, int64_t max_key) {
  const cudaStream_t stream = cuda::current_stream();
  const int64_t n = keys.numel();
  const TensorOptions index_options(kInt64, keys.device());
  const Tensor ids = arange(0, double(n), 1, index_options);
  SortedEntries sorted{empty({n}, index_options), empty({n}, index_options)};
  int end_bit = 1;
  while (end_bit < 63 && (int64_t(1) << end_bit) <= max_key) ++end_bit;
  size_t bytes = 0;
  MINIDET_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys.data<int64_t>(),
                                                     sorted.keys.data<int64_t>(), ids.data<int64_t>(),
                                                     sorted.order.data<int64_t>(), n, 0, end_bit, stream));
  Tensor temp = empty({static_cast<int64_t>(bytes) + 1}, TensorOptions(kUInt8, keys.device()));
  MINIDET_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data<uint8_t>(), bytes, keys.data<int64_t>(),
                                                     sorted.keys.data<int64_t>(), ids.data<int64_t>(),
                                                     sorted.order.data<int64_t>(), n, 0, end_bit, stream));
  return sorted;
}

}  // namespace minidet::ops::detail
