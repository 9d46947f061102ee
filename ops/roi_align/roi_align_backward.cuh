// The fast (non-deterministic) CUDA input gradient of both RoIAlign ops, channel-last like their forward
// (roi_align_nhwc.cuh: the samplers, the work split, why NHWC). DeterministicMode uses roi_align_sorted.cuh
// (fixed sampling ratio, average) or roi_align_gather.cuh (the rest).
//
// The gradient of an average bin hands share = dy[k, c, p, q] / count to every sample of the bin, and each
// sample adds share * w_j to its four neighbouring pixels (max mode: only the bin's winning sample, with
// the whole dy). Many RoIs overlap, so those adds land on the same pixels; two kernels do them:
//
//   backward_map_kernel     when one image's H x W map, for a slab of 32, 64 or 128 channels, fits in half a
//                           multiprocessor's shared memory (a detector's box head: 7x7 bins on a stride-16
//                           or -32 map; map_channels_per_lane has the rule). Each block keeps a private
//                           copy of that map, adds its RoIs' samples there, and merges the copy into the
//                           gradient with one global atomic per touched element: the "privatised histogram"
//                           (each block counts into its own copy, then the copies are summed).
//   backward_atomic_kernel  otherwise (large maps): each sample's adds go straight to global memory; in
//                           float32 on Hopper, average mode, four channels per 16-byte vector atomic.
//
// Why the map pays. Global atomics to one address are serialised in L2. With a detector's defaults, 8 images
// of 128 sampled RoIs, 7x7 bins of 2x2 samples on a 16 x 16 map, every gradient element receives
// 1024 * 49 * 4 * 4 / (8 * 256), about 390 adds; in shared memory those adds are cheaper, and only the merge
// (one add per element per block) reaches L2.
//
// Both write an NHWC buffer, zeroed first, so that a warp's 32 lanes (32 channels of one pixel) add into one
// 128-byte line (two in float64); one transpose then gives the (N, C, H, W) gradient. Zero weights (a sample
// on a pixel line, the duplicated border neighbours) are skipped: they add nothing to a finite gradient. (A
// NaN or infinite dy therefore reaches fewer pixels here than on the CPU and in DeterministicMode, which add
// share * 0 too.) The order of the adds varies from run to run, and so do the last bits of the sums.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/common/bilinear.h"
#include "ops/roi_align/roi_align_nhwc.cuh"

namespace minidet::ops::detail::roi_nhwc {

// ---- the private map ------------------------------------------------------------------------------------
//
// Block = (a chunk of consecutive RoIs, a slab of S = 32 * kPerLane channels); lane l of every warp serves
// the slab's channels l + 32 j, j < kPerLane. For each RoI of its chunk the block
//   1. copies the RoI's shares for the slab, dy[k, slab's channels, bins] / count (contiguous in the
//      (K, C, bins) layout), into shared memory with coalesced reads. Two buffers take turns, so one barrier
//      per RoI keeps a slow warp's reads of RoI k apart from the writes of RoI k + 2;
//   2. splits the RoI's rows of samples (bin, iy) among its warps. A warp locates each sample once for its
//      S channels (so a larger kPerLane locates fewer samples per channel) and adds share * w_j at the four
//      neighbours, lane l into words l + 32 j of the pixel's S: no two lanes share a bank. Max mode splits
//      the bins instead, each lane locating its own channel's winning sample.
// The map holds one image. When the chunk's next RoI is from another image, the block first merges the map
// into the gradient and clears it. RoIs grouped by image (a detector's) merge once or twice per chunk; RoIs
// in any order are still summed right, only with more merges. A merge covers the span of pixel offsets
// touched since the last one, not the whole map.
// (Dealing whole RoIs to warps instead, so that warps add to different pixels, with each lane reading its
// shares from global memory, was slower on a detector's box head: docs/benchmarks.md.)
constexpr int kMapWarps = 16;

// Shared memory, in T: the map (H*W pixels x S channels, pixel-major), then two buffers of shares (S
// channels x `stride`). stride is bins rounded up to an odd number: the 32 lanes reading one bin's shares,
// `stride` words apart, then hit 32 different banks (16 per half-warp in float64).
struct MapLayout {
  int64_t plane, slab, stride;  // slab = S
  MapLayout(const PoolShape& s, int per_lane)
      : plane(s.height * s.width), slab(kLanes * per_lane), stride(s.bins() | 1) {}
  __host__ __device__ int64_t map_values() const { return plane * slab; }
  __host__ __device__ int64_t share_values() const { return slab * stride; }
  template <typename T>
  size_t bytes() const {
    return size_t(map_values() + 2 * share_values()) * sizeof(T);
  }
};

// This thread's place in the block: its lane's channels, and the pixels it has touched since the last merge.
template <int kPerLane>
struct MapLane {
  int lane;
  int64_t slab_channels;  // channels in this block's slab (fewer in the last slab when S does not divide C)
  int lo, hi;             // [lo, hi]: touched pixel offsets; empty as (plane, -1)
  __device__ bool has(int j) const { return lane + kLanes * j < slab_channels; }
};

// Adds share * w_c of one sample to the map at word `word` of its four neighbours c.
template <int kPerLane, typename T>
__device__ __forceinline__ void add_sample(T* map, const MapLayout& layout, const BilinearSample<T>& w, T share,
                                           int64_t word, MapLane<kPerLane>& me) {
  if (!w.inside) return;
  for (int corner = 0; corner < 4; ++corner) {
    if (w.weight[corner] == T(0)) continue;
    const int pixel = int(w.offset[corner]);
    atomicAdd(map + pixel * layout.slab + word, share * w.weight[corner]);
    me.lo = min(me.lo, pixel);
    me.hi = max(me.hi, pixel);
  }
}

// The same for all the lane's channels at once: share[j] * w_c at words lane + 32 j.
template <int kPerLane, typename T>
__device__ __forceinline__ void add_sample(T* map, const MapLayout& layout, const BilinearSample<T>& w,
                                           const T (&share)[kPerLane], MapLane<kPerLane>& me) {
  if (!w.inside) return;
  for (int corner = 0; corner < 4; ++corner) {
    if (w.weight[corner] == T(0)) continue;
    const int pixel = int(w.offset[corner]);
    T* words = map + pixel * layout.slab + me.lane;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (me.has(j)) atomicAdd(words + kLanes * j, share[j] * w.weight[corner]);
    me.lo = min(me.lo, pixel);
    me.hi = max(me.hi, pixel);
  }
}

// Adds the map's touched span into one image's NHWC gradient (`grad_image` points at the slab's first
// channel) and clears it; every thread of the block calls it. span[2] is the block's touched span, in shared
// memory, kept at (plane, -1) between merges.
template <int kPerLane, typename T>
__device__ void merge_map(T* map, const MapLayout& layout, MapLane<kPerLane>& me, int* span, T* grad_image,
                          int64_t channels) {
  __syncthreads();  // every add into the map is done
  for (int d = kLanes / 2; d > 0; d /= 2) {
    me.lo = min(me.lo, __shfl_xor_sync(0xffffffffu, me.lo, d));
    me.hi = max(me.hi, __shfl_xor_sync(0xffffffffu, me.hi, d));
  }
  if (me.lane == 0) {
    atomicMin(span, me.lo);
    atomicMax(span + 1, me.hi);
  }
  __syncthreads();
  // Channels past the slab's last never receive an add, so their words stay 0 and are skipped.
  const int64_t end = int64_t(span[1] + 1) * layout.slab;
  for (int64_t e = int64_t(span[0]) * layout.slab + threadIdx.x; e < end; e += blockDim.x) {
    const T value = map[e];
    if (value == T(0)) continue;
    const int64_t pixel = e / layout.slab, channel = e - pixel * layout.slab;
    atomicAdd(grad_image + pixel * channels + channel, value);
    map[e] = T(0);
  }
  __syncthreads();  // every thread has read the span and cleared its words
  if (threadIdx.x == 0) {
    span[0] = int(layout.plane);
    span[1] = -1;
  }
  me.lo = int(layout.plane);
  me.hi = -1;
}

// RoI k's samples (avg), row by row: row r = bin * grid_h + iy, rows r = warp, warp + kMapWarps, ... Index is
// int32_t unless the RoI has 2^31 rows or more (a box of absurd size): 64-bit division costs several times more.
template <typename Index, int kPerLane, typename T, typename Sampler, typename Roi>
__device__ void add_roi_samples(T* map, const MapLayout& layout, const T* shares, const Sampler& sampler,
                                const Roi& roi, const PoolShape& shape, int warp, MapLane<kPerLane>& me) {
  const Index rows = Index(shape.bins() * roi.grid_h), grid_h = Index(roi.grid_h), pooled_w = Index(shape.pooled_w);
  for (Index r = warp; r < rows; r += kMapWarps) {
    const Index bin = r / grid_h, iy = r - bin * grid_h, p = bin / pooled_w;
    T share[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      share[j] = me.has(j) ? shares[(me.lane + kLanes * j) * layout.stride + bin] : T(0);
    for (int64_t ix = 0; ix < roi.grid_w; ++ix)
      add_sample(map, layout, sampler.sample(roi, p, bin - p * pooled_w, iy, ix), share, me);
  }
}

// Two blocks per multiprocessor in float32 (64 registers a thread, with a few bytes spilled at 2 and 4 channels
// per lane; map_channels_per_lane sizes the map for two), one in float64, which needs some 90 to 110
// registers. float64 maps are sized by the same rule all the same: one rule, and float64 is for checking.
template <typename T, int kPerLane, bool kMax, typename Sampler>
__global__ void __launch_bounds__(kMapWarps* kLanes, sizeof(T) == 4 ? 2 : 1)
    backward_map_kernel(int64_t rois, int64_t rois_per_block, const T* grad_output, Sampler sampler,
                        const int64_t* argmax, T* grad_nhwc, PoolShape shape, MapLayout layout) {
  extern __shared__ __align__(16) unsigned char map_bytes[];
  T* map = reinterpret_cast<T*>(map_bytes);
  T* share_buffers = map + layout.map_values();
  __shared__ int span[2];
  const int warp = threadIdx.x / kLanes;
  const int64_t slabs = (shape.channels + layout.slab - 1) / layout.slab, bins = shape.bins();
  const int64_t c0 = blockIdx.x % slabs * layout.slab;  // the slab's first channel
  MapLane<kPerLane> me{int(threadIdx.x % kLanes), min(layout.slab, shape.channels - c0), int(layout.plane), -1};
  const int64_t first = int64_t(blockIdx.x / slabs) * rois_per_block, last = min(first + rois_per_block, rois);

  for (int64_t e = threadIdx.x; e < layout.map_values(); e += blockDim.x) map[e] = T(0);
  if (threadIdx.x == 0) {
    span[0] = int(layout.plane);
    span[1] = -1;
  }
  // The image the map holds, the same in every thread; -1: none yet. Batch indices are in [0, N): roi_align
  // checks them, unless its caller turns check_roi_values off for rows it vouches for.
  int64_t image = -1;
  for (int64_t k = first; k < last; ++k) {
    const auto roi = sampler.roi(k);
    if (roi.batch != image) {
      if (image >= 0)
        merge_map(map, layout, me, span, grad_nhwc + image * layout.plane * shape.channels + c0, shape.channels);
      image = roi.batch;
    }
    // 1. RoI k's shares for the slab's channels.
    T* shares = share_buffers + (k - first) % 2 * layout.share_values();
    const T* dy = grad_output + (k * shape.channels + c0) * bins;
    // int: the buffer fits in shared memory.
    for (int e = int(threadIdx.x); e < int(me.slab_channels * bins); e += int(blockDim.x)) {
      const int channel = e / int(bins), bin = e - channel * int(bins);
      shares[channel * layout.stride + bin] = kMax ? dy[e] : dy[e] / sampler.divisor(roi);
    }
    __syncthreads();
    // 2. The RoI's samples, or (max) its bins, shared among the warps.
    if constexpr (kMax) {
      for (int64_t bin = warp; bin < bins; bin += kMapWarps) {
        const int64_t p = bin / shape.pooled_w;
#pragma unroll
        for (int j = 0; j < kPerLane; ++j) {  // each channel its own winner: one sample per lane and j
          if (!me.has(j)) continue;
          const int64_t channel = me.lane + kLanes * j, s = argmax[(k * shape.channels + c0 + channel) * bins + bin];
          const BilinearSample<T> w = sampler.sample(roi, p, bin - p * shape.pooled_w, s / roi.grid_w, s % roi.grid_w);
          add_sample(map, layout, w, shares[channel * layout.stride + bin], channel, me);
        }
      }
    } else if (shape.bins() * roi.grid_h < (int64_t(1) << 31) - kMapWarps) {  // r + kMapWarps stays an int32_t
      add_roi_samples<int32_t>(map, layout, shares, sampler, roi, shape, warp, me);
    } else {
      add_roi_samples<int64_t>(map, layout, shares, sampler, roi, shape, warp, me);
    }
  }
  if (image >= 0)
    merge_map(map, layout, me, span, grad_nhwc + image * layout.plane * shape.channels + c0, shape.channels);
}

// ---- straight to global memory ----------------------------------------------------------------------------
//
// Work items as in the forward (roi_align_nhwc.cuh's WorkSplit): (RoI, bin, slab, lane), each thread a bin's
// samples for its 8 channels, one global atomicAdd per sample, neighbour and channel.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The average's adds of one work item in float32 on Hopper (compute capability 9.0 has atomicAdd on float4),
// for C a multiple of 4: the lane takes the same slab's 8 channels as the scalar loop, but as two runs of
// four (channels 4 l to 4 l + 3 of each half of the slab), so each neighbour gets two 16-byte vector atomics
// instead of eight scalar ones: fewer atomic requests for L2 to serve, the same sums.
template <typename Sampler, typename Roi, typename Index>
__device__ void add_avg_bin_float4(const float* grad_output, const Sampler& sampler, const Roi& roi,
                                   const WorkItem<Index>& e, float* grad_nhwc, const PoolShape& shape) {
  constexpr int64_t kHalf = kChannelsPerSlab / 2;
  const int64_t lane = e.c0 % kLanes, first = e.c0 - lane + 4 * lane;
  const int64_t bins = shape.bins(), out0 = (int64_t(e.k) * shape.channels + first) * bins + e.bin;
  const float divisor = sampler.divisor(roi);
  float4 share[2];
  bool has[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    has[h] = first + kHalf * h < shape.channels;
    const float* dy = grad_output + out0 + kHalf * h * bins;
    share[h] = has[h] ? make_float4(dy[0] / divisor, dy[bins] / divisor, dy[2 * bins] / divisor, dy[3 * bins] / divisor)
                      : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float* image = grad_nhwc + roi.batch * shape.height * shape.width * shape.channels + first;
  for (int64_t iy = 0; iy < roi.grid_h; ++iy) {
    for (int64_t ix = 0; ix < roi.grid_w; ++ix) {
      const BilinearSample<float> w = sampler.sample(roi, e.p, e.q, iy, ix);
      if (!w.inside) continue;
      for (int corner = 0; corner < 4; ++corner) {
        const float wc = w.weight[corner];
        if (wc == 0.f) continue;
        float* pixel = image + w.offset[corner] * shape.channels;
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (has[h])
            atomicAdd(reinterpret_cast<float4*>(pixel + kHalf * h),
                      make_float4(share[h].x * wc, share[h].y * wc, share[h].z * wc, share[h].w * wc));
      }
    }
  }
}
#endif

template <typename T, typename Index, bool kMax, typename Sampler>
__global__ void backward_atomic_kernel(Index n, const T* grad_output, Sampler sampler, const int64_t* argmax,
                                       T* grad_nhwc, PoolShape shape, const uint32_t* order) {
  const WorkSplit<Index> split(shape, order);
  for (Index i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += Index(blockDim.x) * gridDim.x) {
    const WorkItem<Index> e = split(i);
    const auto roi = sampler.roi(e.k);
    const int64_t c0 = e.c0;
    // Channel c0 + 32 j of this bin is grad_output[first_out + 32 j * bins].
    const int64_t first_out = (int64_t(e.k) * shape.channels + c0) * shape.bins() + e.bin;
    T* dst = grad_nhwc + roi.batch * shape.height * shape.width * shape.channels + c0;
    if constexpr (kMax) {
      // Only the winning sample, with the whole gradient; each channel has its own winner.
#pragma unroll
      for (int j = 0; j < kChannelsPerLane; ++j) {
        if (c0 + kLanes * j >= shape.channels) continue;
        const int64_t out = first_out + int64_t(kLanes) * j * shape.bins(), s = argmax[out];
        const BilinearSample<T> w = sampler.sample(roi, e.p, e.q, s / roi.grid_w, s % roi.grid_w);
        if (!w.inside) continue;
        for (int corner = 0; corner < 4; ++corner)
          if (w.weight[corner] != T(0))
            atomicAdd(dst + w.offset[corner] * shape.channels + kLanes * j, grad_output[out] * w.weight[corner]);
      }
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      if constexpr (std::is_same_v<T, float>) {
        if (shape.channels % 4 == 0) {
          add_avg_bin_float4(grad_output, sampler, roi, e, grad_nhwc, shape);
          continue;
        }
      }
#endif
      // avg: every sample hands gradient / count to its four neighbours, for each of the thread's channels.
      T share[kChannelsPerLane];
#pragma unroll
      for (int j = 0; j < kChannelsPerLane; ++j)
        share[j] = c0 + kLanes * j < shape.channels
                       ? grad_output[first_out + int64_t(kLanes) * j * shape.bins()] / sampler.divisor(roi)
                       : T(0);
      for (int64_t iy = 0; iy < roi.grid_h; ++iy) {
        for (int64_t ix = 0; ix < roi.grid_w; ++ix) {
          const BilinearSample<T> w = sampler.sample(roi, e.p, e.q, iy, ix);
          if (!w.inside) continue;
          for (int corner = 0; corner < 4; ++corner) {
            if (w.weight[corner] == T(0)) continue;
            T* pixel = dst + w.offset[corner] * shape.channels;
#pragma unroll
            for (int j = 0; j < kChannelsPerLane; ++j)
              if (c0 + kLanes * j < shape.channels) atomicAdd(pixel + kLanes * j, share[j] * w.weight[corner]);
          }
        }
      }
    }
  }
}

// ---- launcher: call it inside MINIDET_DISPATCH_FLOATING with T = scalar_t -----------------------------------

// The channels per lane of backward_map_kernel for this shape: the most (of 4, 2, 1; at most what C needs)
// whose map lets two blocks share a multiprocessor; 0 when even one channel per lane does not, and
// backward_atomic_kernel runs instead. More channels per lane locate each sample fewer times. A map too
// large for two blocks is also one that a RoI covers only a small part of, so the merges (which go over
// whole rows of the map) cost more than they save; and one block alone would have half the warps in flight
// to hide the shared-memory atomics' latency.
// The most dynamic shared memory backward_map_kernel takes: half of what a block may opt into (227 KB on
// Hopper, whose multiprocessors hold 228 KB), less 1 KB for what the system reserves per block and the
// kernel's own few bytes, so that two blocks fit a multiprocessor.
inline size_t map_bytes_cap() { return size_t(cuda::max_shared_memory_per_block()) / 2 - 1024; }

template <typename T>
int map_channels_per_lane(const PoolShape& shape) {
  for (int per_lane = 4; per_lane >= 1; per_lane /= 2)
    if ((per_lane == 1 || kLanes * per_lane / 2 < shape.channels) &&
        MapLayout(shape, per_lane).bytes<T>() <= map_bytes_cap())
      return per_lane;
  return 0;
}

// How a shared-memory map kernel deals out its RoIs: each block takes per_block consecutive RoIs of one channel
// slab (at least min_per_block), enough blocks to give every multiprocessor two; more, smaller chunks would
// merge the map more often.
struct MapChunks {
  int64_t per_block, blocks;
};
inline MapChunks map_chunks(int64_t rois, int64_t slabs, int64_t min_per_block = 1) {
  const int64_t target = 2 * int64_t(cuda::multiprocessor_count());
  const int64_t per_block = std::max<int64_t>(min_per_block, (rois * slabs + target - 1) / target);
  return {per_block, slabs * ((rois + per_block - 1) / per_block)};
}

template <typename T, int kPerLane, bool kMax, typename Sampler>
void launch_backward_map(const Tensor& grad_output, const Sampler& sampler, const int64_t* argmax, T* grad_nhwc,
                         const PoolShape& shape) {
  const MapLayout layout(shape, kPerLane);
  const int64_t rois = grad_output.size(0);
  const MapChunks chunks = map_chunks(rois, (shape.channels + layout.slab - 1) / layout.slab);
  const size_t bytes = layout.bytes<T>();
  auto* kernel = backward_map_kernel<T, kPerLane, kMax, Sampler>;
  cuda::opt_in_to_shared_memory(kernel, bytes);
  kernel<<<unsigned(chunks.blocks), kMapWarps * kLanes, bytes, cuda::current_stream()>>>(
      rois, chunks.per_block, grad_output.data<T>(), sampler, argmax, grad_nhwc, shape, layout);
}

// grad_input (N, C, H, W) is written, not accumulated, from grad_output (K, C, ph, pw) (and argmax like it
// when kMax); all contiguous.
template <typename T, bool kMax, typename Sampler>
void backward(const Tensor& grad_output, const Sampler& sampler, const Tensor& argmax, const Tensor& grad_input,
              const char* kernel_name) {
  if (grad_input.numel() == 0) return;
  if (grad_output.numel() == 0) {
    grad_input.zero_();
    return;
  }
  const PoolShape shape = pool_shape(grad_input, grad_output);
  const int64_t batch = grad_input.size(0), rois = grad_output.size(0);
  const int64_t* winners = argmax.defined() ? argmax.data<int64_t>() : nullptr;
  Tensor grad_nhwc = zeros({batch, shape.height, shape.width, shape.channels}, grad_input.options());
  T* grad = grad_nhwc.data<T>();
  const int per_lane = map_channels_per_lane<T>(shape);
  if (per_lane == 4)
    launch_backward_map<T, 4, kMax>(grad_output, sampler, winners, grad, shape);
  else if (per_lane == 2)
    launch_backward_map<T, 2, kMax>(grad_output, sampler, winners, grad, shape);
  else if (per_lane == 1)
    launch_backward_map<T, 1, kMax>(grad_output, sampler, winners, grad, shape);
  else {
    const int64_t n = rois * shape.bins() * channel_slabs(shape.channels) * kLanes;  // work items
    std::vector<Tensor> order_storage;
    const uint32_t* order = roi_order<T>(sampler, rois, grad_input, shape, order_storage);
    with_index(n, [&](auto index) {
      using Index = decltype(index);
      backward_atomic_kernel<T, Index, kMax, Sampler>
          <<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
              Index(n), grad_output.data<T>(), sampler, winners, grad, shape, order);
    });
  }
  MINIDET_CUDA_LAUNCH_CHECK(kernel_name);
  transpose(grad, grad_input.data<T>(), batch, shape.height * shape.width, shape.channels);
}

}  // namespace minidet::ops::detail::roi_nhwc
