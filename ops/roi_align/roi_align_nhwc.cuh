// The channel-last CUDA kernels of RoIAlign (the forward here, the input gradient in roi_align_backward.cuh),
// written once for both RoIAlign ops: the axis-aligned one (roi_align_cuda.cu; Mask R-CNN: He et al. 2017)
// and the rotated one (ops/roi_align_rotated; detectron2's ROIAlignRotated). Both average (or take the max
// of) bilinear reads at a grid of samples in every bin; they differ only in WHERE sample (iy, ix) of bin
// (p, q) of RoI k sits in the feature map. That mapping is a "sampler", a small struct the kernels take by
// value:
//
//   roi(k)                      RoI k's geometry: a struct with int64_t fields batch, grid_h, grid_w (samples
//                               per bin along each axis). Computed or loaded once per work item.
//   sample(roi, p, q, iy, ix)   the BilinearSample (ops/common/bilinear.h) of that sample: 4 neighbours, weights
//   divisor(roi)                what an average bin's sum is divided by (grid_h * grid_w, as a T)
//
// Everything else (the work split, the channel loops, the order of every sum) lives here and in
// roi_align_backward.cuh, so the two ops cannot drift apart.
//
// Why channel-last. The geometry of a sample (where it sits, its weights) is the same for all C channels,
// and C is large (256 in a detector's box head). So the work is split as (RoI, bin, channels) with the
// CHANNELS FASTEST: the 32 lanes of a warp are 32 channels of one bin (each lane serves 8 channels, 32
// apart, so one geometry computation serves 256 outputs; see WorkItem). The lanes compute the same geometry
// in lockstep and read and write the 32 channels of the same pixel. In the usual NCHW layout those 32 values
// are H*W apart, 32 memory transactions; in NHWC (channel last) they are consecutive: ONE 128-byte line.
//   forward:   input NCHW -> NHWC once (a tiled transpose, ~2 passes over the input), then every bilinear
//              read is a coalesced warp read.
//   backward:  the atomicAdd scatter goes into an NHWC gradient buffer, so each warp-wide atomic covers one
//              128-byte line instead of 32 scattered addresses (torchvision's layout), then NHWC -> NCHW.
//              Its kernels, which use this file's work split, are in roi_align_backward.cuh.
// Zero-weight neighbours are skipped (a sample on a pixel line, the duplicated border neighbours).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/error.h"
#include "core/factories.h"
#include "ops/common/bilinear.h"
#include "ops/common/radix_sort.cuh"
#include "ops/common/transpose.cuh"
#include "ops/roi_align/roi_align_kernels.h"  // max_sample_wins

namespace minidet::ops::detail::roi_nhwc {

// The batched transpose (ops/common/transpose.cuh) under the names this file's users call it by.
using tiled_transpose::kTile;
using tiled_transpose::kTileRows;
using tiled_transpose::kTransposeThreads;
using tiled_transpose::transpose;

// Work items. Item i is (RoI k, bin, slab, lane), lane fastest: the 32 lanes of a warp share one (RoI, bin),
// so they compute the same sample geometry in lockstep, and lane l of slab b serves the kChannelsPerLane
// channels c = b * kChannelsPerSlab + l + 32 j. For each j the warp touches 32 consecutive channels of one
// pixel: one 128-byte line in NHWC. One geometry computation serves 8 channels per lane (256 per warp),
// which is what makes the kernels memory-bound rather than busy recomputing positions and weights.
// Index is int32_t when the item count is below 2^31 (64-bit division costs several times more), int64_t
// otherwise; addresses are always computed in 64 bits.
constexpr int kLanes = 32;
constexpr int kChannelsPerLane = 8;
constexpr int64_t kChannelsPerSlab = kLanes * kChannelsPerLane;

__host__ __device__ inline int64_t channel_slabs(int64_t channels) {
  return (channels + kChannelsPerSlab - 1) / kChannelsPerSlab;
}

// The sizes the kernels index with: input (N, C, H, W), output (K, C, pooled_h, pooled_w).
struct PoolShape {
  int64_t channels, height, width, pooled_h, pooled_w;
  __host__ __device__ int64_t bins() const { return pooled_h * pooled_w; }
};

inline PoolShape pool_shape(const Tensor& features, const Tensor& pooled) {
  return {features.size(1), features.size(2), features.size(3), pooled.size(2), pooled.size(3)};
}

// Work item i: RoI k, bin = p * pooled_w + q, and the thread's first channel c0 (its channels: c0 + 32 j).
// The items run through the RoIs in `order` when there is one (locality_order below), else as they come.
template <typename Index>
struct WorkItem {
  Index k, bin, p, q;
  int64_t c0;
};
template <typename Index>
struct WorkSplit {
  Index slabs, bins, pooled_w;
  const uint32_t* order;
  __device__ WorkSplit(const PoolShape& s, const uint32_t* roi_order)
      : slabs(Index(channel_slabs(s.channels))), bins(Index(s.bins())), pooled_w(Index(s.pooled_w)), order(roi_order) {}
  __device__ WorkItem<Index> operator()(Index i) const {
    const Index warp = i / kLanes, k_bin = warp / slabs, place = k_bin / bins, bin = k_bin - place * bins;
    const Index slab = warp - k_bin * slabs, lane = i - warp * kLanes, p = bin / pooled_w;
    const Index k = order ? Index(order[place]) : place;
    return {k, bin, p, bin - p * pooled_w, int64_t(slab) * kChannelsPerSlab + lane};
  }
};

using cuda::with_index;  // the narrowest Index that counts n work items (core/cuda/launch.h)

// One sample's bilinear value at each of a thread's channels c0 + 32 j (j < kCount, those below `channels`),
// handed to visit(j, value): the average adds it to channel j's sum, the max compares it with channel j's
// best. `features` points at channel c0 of the RoI's image (NHWC). Both forward kernels read through here,
// so their values are the same term for term.
// __forceinline__: inlined, the visitor's captured results stay in registers as if written out in place.
template <int kCount, typename T, typename Visit>
__device__ __forceinline__ void for_each_sample_value(const T* features, const BilinearSample<T>& w,
                                                      int64_t channels, int64_t c0, Visit&& visit) {
  const T* f0 = features + w.offset[0] * channels;
  const T* f1 = features + w.offset[1] * channels;
  const T* f2 = features + w.offset[2] * channels;
  const T* f3 = features + w.offset[3] * channels;
#pragma unroll
  for (int j = 0; j < kCount; ++j) {
    if (c0 + kLanes * j >= channels) continue;
    const int d = kLanes * j;
    // Same expression and order as the CPU's bilinear_interpolate; outside samples read 0.
    visit(j, w.inside ? w.weight[0] * f0[d] + w.weight[1] * f1[d] + w.weight[2] * f2[d] + w.weight[3] * f3[d] : T(0));
  }
}

// kMax: max pooling (argmax keeps the winning sample) instead of the average. As a template argument, the
// avg kernel keeps no winners (fewer registers, more threads in flight to hide the scattered reads' latency).
template <typename T, typename Index, bool kMax, typename Sampler>
__global__ void forward_kernel(Index n, const T* input_nhwc, Sampler sampler, T* output, int64_t* argmax,
                               PoolShape shape, const uint32_t* order) {
  const WorkSplit<Index> split(shape, order);
  for (Index i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += Index(blockDim.x) * gridDim.x) {
    const WorkItem<Index> e = split(i);
    const auto roi = sampler.roi(e.k);
    const int64_t c0 = e.c0;
    // Pixel `offset` of channel c0 + 32 j is features[offset * C + 32 j]: NHWC.
    const T* features = input_nhwc + roi.batch * shape.height * shape.width * shape.channels + c0;
    T result[kChannelsPerLane];
    int64_t best[kChannelsPerLane];  // max mode: index of the winning sample (kMax only)
#pragma unroll
    for (int j = 0; j < kChannelsPerLane; ++j) {
      result[j] = T(0);
      best[j] = 0;
    }
    int64_t s = 0;
    for (int64_t iy = 0; iy < roi.grid_h; ++iy) {
      for (int64_t ix = 0; ix < roi.grid_w; ++ix, ++s) {
        const BilinearSample<T> w = sampler.sample(roi, e.p, e.q, iy, ix);
        for_each_sample_value<kChannelsPerLane>(features, w, shape.channels, c0, [&](int j, T v) {
          if constexpr (!kMax) {
            result[j] += v;
          } else if (s == 0 || max_sample_wins(v, result[j])) {
            result[j] = v;
            best[j] = s;
          }
        });
      }
    }
#pragma unroll
    for (int j = 0; j < kChannelsPerLane; ++j) {
      const int64_t c = c0 + kLanes * j;
      if (c >= shape.channels) continue;
      const int64_t out = (int64_t(e.k) * shape.channels + c) * shape.bins() + e.bin;  // (K, C, ph, pw)
      if constexpr (kMax) {
        output[out] = result[j];
        argmax[out] = best[j];
      } else {
        output[out] = result[j] / sampler.divisor(roi);
      }
    }
  }
}

// The average forward with its writes staged, for maps of at most 256 channels (the detector's features have
// 128, the large benchmark map 256). The output is (K, C, bins), bins fastest, so the warp above, whose lanes
// are 32 channels of one bin, writes 32 values bins apart: 32 partial 32-byte sectors per store, one sector
// written for every two read with 2x2 samples per bin (each sample reads four 128-byte lines). Here
// a block takes one RoI, all its C channels: its warps take the bins in turn (lane l, the channels l + 32 j,
// j < kPerLane, as above), write the averages into shared memory, and the block then copies RoI k's
// (C, bins) block of the output, which is contiguous, with coalesced stores. Each bin's sum is the one above,
// term for term. kPerLane is 4 (C <= 128) or 8 (C <= 256); the launcher sends only those here.
constexpr size_t kStagedBytesCap = size_t(64) << 10;

// Blocks a multiprocessor should hold at once, at 8 channels a lane. In float32 the 49 KB of 7x7 bins by 256
// channels let four blocks share a multiprocessor's shared memory, but the registers the compiler chose on its
// own let only three fit; capped at 64 a thread (with no spills), four fit, and the large map's forward waits
// on L2 with a third more warps in flight (docs/benchmarks.md). float64, and 4 channels a lane (whose
// registers fit already in roi_align, and whose turned samples in roi_align_rotated need more), keep the
// compiler's choice.
template <typename T, int kPerLane>
constexpr int kStagedMinBlocks = sizeof(T) == 4 && kPerLane == 8 ? 4 : 1;

template <typename T, typename Index, int kPerLane, typename Sampler>
__global__ void __launch_bounds__(cuda::kThreadsPerBlock, kStagedMinBlocks<T, kPerLane>)
    forward_avg_staged_kernel(Index rois, const T* input_nhwc, Sampler sampler, T* output, PoolShape shape,
                              const uint32_t* order) {
  extern __shared__ unsigned char staged_bytes[];
  T* staged = reinterpret_cast<T*>(staged_bytes);  // (channel, bin)
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes, warps = blockDim.x / kLanes;
  const int64_t bins = shape.bins();
  for (Index i = blockIdx.x; i < rois; i += gridDim.x) {
    const Index k = order ? Index(order[i]) : i;
    const auto roi = sampler.roi(k);
    const T* features = input_nhwc + roi.batch * shape.height * shape.width * shape.channels + lane;
    for (int64_t bin = warp; bin < bins; bin += warps) {
      const int64_t p = bin / shape.pooled_w, q = bin - p * shape.pooled_w;
      T result[kPerLane];
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) result[j] = T(0);
      for (int64_t iy = 0; iy < roi.grid_h; ++iy) {
        for (int64_t ix = 0; ix < roi.grid_w; ++ix) {
          const BilinearSample<T> w = sampler.sample(roi, p, q, iy, ix);
          for_each_sample_value<kPerLane>(features, w, shape.channels, lane, [&](int j, T v) { result[j] += v; });
        }
      }
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane + kLanes * j < shape.channels)
          staged[(lane + kLanes * j) * bins + bin] = result[j] / sampler.divisor(roi);
    }
    __syncthreads();
    T* dst = output + int64_t(k) * shape.channels * bins;  // RoI k's (C, bins) block
    for (int64_t e = threadIdx.x; e < shape.channels * bins; e += blockDim.x) dst[e] = staged[e];
    __syncthreads();  // `staged` is reused by the block's next RoI
  }
}

// The key of RoI k for locality_order: its image, then the pixel its centre bin's first sample reads, row-major.
template <typename T, typename Sampler>
__global__ void locality_keys_kernel(int64_t rois, Sampler sampler, PoolShape shape, uint32_t* keys,
                                     uint32_t* numbers) {
  MINIDET_KERNEL_LOOP(k, rois) {
    const auto roi = sampler.roi(k);
    const BilinearSample<T> w = sampler.sample(roi, shape.pooled_h / 2, shape.pooled_w / 2, 0, 0);
    keys[k] = uint32_t(roi.batch * shape.height * shape.width + w.offset[0]);
    numbers[k] = uint32_t(k);
  }
}

// The RoIs in the order of where they sit: by image, then by the row and column of their centre. The blocks of
// a grid start in index order, so taking RoIs in this order keeps the ones in flight together on one part of
// one image, whose features then stay in L2 between them. Returns a device array of K RoI indices, which
// lives in `storage`.
template <typename T, typename Sampler>
const uint32_t* locality_order(const Sampler& sampler, int64_t rois, int64_t images, const PoolShape& shape,
                               const Device& device, std::vector<Tensor>& storage) {
  const cudaStream_t stream = cuda::current_stream();
  const TensorOptions bytes(kUInt8, device);
  // minidet has no uint32 dtype: the keys and numbers (two buffers each, for the radix sort) live in raw bytes.
  const Tensor keys = empty({2 * rois * int64_t(sizeof(uint32_t))}, bytes);
  const Tensor numbers = empty({2 * rois * int64_t(sizeof(uint32_t))}, bytes);
  uint32_t* key_data = static_cast<uint32_t*>(keys.raw_data());
  uint32_t* number_data = static_cast<uint32_t*>(numbers.raw_data());
  locality_keys_kernel<T, Sampler>
      <<<cuda::blocks_for(rois), cuda::kThreadsPerBlock, 0, stream>>>(rois, sampler, shape, key_data, number_data);
  MINIDET_CUDA_LAUNCH_CHECK("roi_nhwc locality_keys_kernel");
  // A stray row (its image index out of range, with the value check off) has a key past the largest: only its
  // place in the order depends on that, and its kernels skip it as ever.
  cub::DoubleBuffer<uint32_t> key_buffers(key_data, key_data + rois);
  cub::DoubleBuffer<uint32_t> number_buffers(number_data, number_data + rois);
  radix_sort_pairs(key_buffers, number_buffers, rois, uint64_t(images * shape.height * shape.width - 1), device);
  storage = {keys, numbers};  // freed by the caller after the launch that reads them (one stream)
  return number_buffers.Current();
}

// locality_order's RoIs for kernels that read or add into `map` (N, C, H, W), when it is at least half the size
// of the L2 cache; else null, and the kernels take the RoIs as they come. Below that the features of RoIs in
// any order mostly stay in L2 (the small maps of a detector's box head are one or two MB); the order costs
// about 12 us (a kernel and CUB's one-block radix sort for a few thousand RoIs), less than the transpose
// of such a map. On the large benchmark map (111 MB) it took the forward's DRAM reads from 734 to 110 MB
// (docs/benchmarks.md).
template <typename T, typename Sampler>
const uint32_t* roi_order(const Sampler& sampler, int64_t rois, const Tensor& map, const PoolShape& shape,
                          std::vector<Tensor>& storage) {
  const int64_t images = map.size(0), pixels = images * shape.height * shape.width;
  const bool large = map.numel() * int64_t(sizeof(T)) >= cuda::l2_cache_bytes() / 2;
  // The keys are 32-bit pixel numbers, and CUB counts items in an int.
  if (!large || rois < 2 || pixels >= (int64_t(1) << 32) || rois >= (int64_t(1) << 31)) return nullptr;
  return locality_order<T>(sampler, rois, images, shape, map.device(), storage);
}

// ---- launchers: call them inside MINIDET_DISPATCH_FLOATING with T = scalar_t ---------------------------------

// output (K, C, ph, pw), and argmax like it when kMax, from input (N, C, H, W); all contiguous. The staged
// average takes up to staged_channels channels, 128 or 256 (see below).
template <typename T, bool kMax, typename Sampler>
void forward(const Tensor& input, const Sampler& sampler, const Tensor& output, const Tensor& argmax,
             const char* kernel_name, int64_t staged_channels = 4 * kLanes) {
  const PoolShape shape = pool_shape(input, output);
  const int64_t n = output.size(0) * shape.bins() * channel_slabs(shape.channels) * kLanes;  // work items
  if (n == 0) return;
  Tensor input_nhwc = empty({input.size(0), shape.height, shape.width, shape.channels}, input.options());
  transpose(input.data<T>(), input_nhwc.data<T>(), input.size(0), shape.channels, shape.height * shape.width);
  // The staged average (one block per RoI) when its buffer, 128 or 256 channels by the bins, holds every
  // channel and fits kStagedBytesCap (7x7 bins of 256 channels: 49 KB in float32, past the default 48 KB, so
  // the kernel opts in). The kernel has no channel tiles. At 8 channels per lane (C over 128) it keeps fewer
  // warps in flight than the warp-per-bin kernel: roi_align's forward on a 256-channel map gained from the
  // coalesced writes, roi_align_rotated's, whose samples are turned by the box's angle and cost more to
  // locate, took almost twice as long (docs/benchmarks.md); so the caller says how many channels it stages.
  // Wider maps keep the warp-per-bin kernel: tiling them would locate every sample once per tile, which on
  // a 256-channel map cost about what the coalesced writes saved.
  std::vector<Tensor> order_storage;
  const uint32_t* order = roi_order<T>(sampler, output.size(0), input, shape, order_storage);
  const int staged_per_lane = shape.channels <= 4 * kLanes ? 4 : 8;
  const size_t staged_bytes = size_t(staged_per_lane * kLanes * shape.bins()) * sizeof(T);
  if (!kMax && shape.channels <= std::min<int64_t>(staged_channels, 8 * kLanes) && staged_bytes <= kStagedBytesCap) {
    const int64_t rois = output.size(0);
    auto launch = [&](auto per_lane) {
      with_index(rois, [&](auto index) {
        using Index = decltype(index);
        auto* kernel = forward_avg_staged_kernel<T, Index, decltype(per_lane)::value, Sampler>;
        cuda::opt_in_to_shared_memory(kernel, staged_bytes);
        kernel<<<cuda::blocks_for(rois, 1), cuda::kThreadsPerBlock, staged_bytes, cuda::current_stream()>>>(
            Index(rois), input_nhwc.data<T>(), sampler, output.data<T>(), shape, order);
      });
    };
    if (staged_per_lane == 4)
      launch(std::integral_constant<int, 4>());
    else
      launch(std::integral_constant<int, 8>());
    MINIDET_CUDA_LAUNCH_CHECK(kernel_name);
    return;
  }
  with_index(n, [&](auto index) {
    using Index = decltype(index);
    forward_kernel<T, Index, kMax, Sampler><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        Index(n), input_nhwc.data<T>(), sampler, output.data<T>(), argmax.defined() ? argmax.data<int64_t>() : nullptr,
        shape, order);
  });
  MINIDET_CUDA_LAUNCH_CHECK(kernel_name);
}

}  // namespace minidet::ops::detail::roi_nhwc
