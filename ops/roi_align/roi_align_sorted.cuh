// The deterministic CUDA input gradient of both RoIAlign ops in average mode with a fixed sampling ratio:
// "sorted terms". Like the tile gather (roi_align_gather.cuh) it writes dx with no atomics and adds each
// element's terms in the CPU's order with the CPU's arithmetic, so it gives the CPU's bits (for the rotated
// op, wherever the devices' sin and cos agree); it is faster wherever the same RoI would be met by many
// tiles (the gather pays a set-up per RoI and tile), which on the maps measured was everywhere.
//
// The CPU adds into dx[n, c, pixel] the terms share[k, bin, c] * w, share = dy[k, c, bin] / count, in the
// order (RoI k, bin, sample, neighbour j). Number those terms t = ((k * bins + bin) * S + s) * 4 + j, S the
// samples of a bin: the CPU's order of one element's terms is the order of their numbers t. A term's pixel
// and weight w come from the sample's place alone, never from the channel. So:
//
//   1. terms_kernel      one thread per sample writes its four terms: key = the pixel in the stacked map
//                        (n * H * W + offset), or the sentinel N * H * W for a sample outside the map or a
//                        row naming no image; the term's number t; and its weight w.
//   2. the shares        share[k, bin, c] = dy[k, c, bin] / count, channel-last (roi_nhwc::transpose), so
//                        that 32 lanes of 32 channels read one 128-byte line per term.
//   3. a stable radix sort of (key, t) by key (cub::DeviceRadixSort; LSD radix sorts keep equal keys in
//                        input order): each pixel's terms now lie together, in the order of t.
//   4. runs_kernel       where each pixel's run of terms starts in the sorted list, and each place's bin
//                        (k * bins + bin = t / (4 S)) and weight, laid out in sorted order.
//   5. gather_kernel     one warp per pixel and 32 channels, lane = channel: it walks the pixel's run in
//                        order, 32 terms at a time (lane u loads term u's bin and weight, shuffles hand
//                        them round), and adds share * w for its channel. Then the block's 8 pixels go out
//                        through shared memory, in runs along the rows of dx.
//
// Each element starts from 0 and receives its terms in the order of t, with unfused products as on the CPU:
// the CPU's bits, every run. The cost is a sort of 4 * K * bins * S keys and one pass over the terms per 32
// channels, whatever the size of the map. The pass reads one share per term and channel from L2 (4 bytes
// x 4 K bins S x C), which is what its time follows on small maps with many terms per pixel.
//
// Scope (fits()): average mode only (max mode's winning sample differs per channel), a fixed sampling ratio
// (so S, and the number of terms, are known on the host without reading the RoIs: no synchronisation), at
// most kMaxTerms terms, and keys below 2^31. Everything else takes the tile gather.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/common/bilinear.h"
#include "ops/common/radix_sort.cuh"
#include "ops/roi_align/roi_align_kernels.h"  // unfused_mul
#include "ops/roi_align/roi_align_nhwc.cuh"   // kLanes, kTile

namespace minidet::ops::detail::roi_sorted {

using roi_nhwc::kLanes;

struct TermShape {
  int64_t batch, rois, channels, height, width, pooled_h, pooled_w;
  int64_t grid_h, grid_w;  // samples per bin along each axis: the fixed sampling ratio
  __host__ __device__ int64_t bins() const { return pooled_h * pooled_w; }
  __host__ __device__ int64_t samples() const { return grid_h * grid_w; }  // S, per bin
  __host__ __device__ int64_t terms() const { return 4 * rois * bins() * samples(); }
  __host__ __device__ int64_t pixels() const { return batch * height * width; }  // also the sentinel key
};

// True when the sorted path can take this backward (see the top of the file). Its scratch is 16 bytes a term
// plus twice sizeof(T) (24 in float32, 32 in float64: some 1.5 and 2 GiB at kMaxTerms), then sizeof(T) x K x
// bins x C for the shares; a detector's box head has a few million terms. Past kMaxTerms the gather, which
// needs no scratch, takes over. Each factor is bounded before the product, which cannot then overflow.
constexpr int64_t kMaxTerms = int64_t(1) << 26;
inline bool fits(const TermShape& s, bool max_mode) {
  const auto small = [](int64_t v) { return v > 0 && v <= kMaxTerms; };
  return !max_mode && small(s.grid_h) && small(s.grid_w) && small(s.pooled_h) && small(s.pooled_w) && small(s.rois) &&
         small(s.samples()) && small(s.bins()) && small(s.bins() * s.samples()) && s.terms() <= kMaxTerms &&
         s.pixels() < (int64_t(1) << 31);
}

// 1. Sample i = (k * bins + bin) * S + s writes terms 4i .. 4i + 3.
template <typename T, typename Sampler>
__global__ void terms_kernel(Sampler sampler, TermShape s, uint32_t* keys, uint32_t* numbers, T* weights, T* divisors) {
  const int64_t samples = s.samples(), per_roi = s.bins() * samples, plane = s.height * s.width;
  MINIDET_KERNEL_LOOP(i, s.rois * per_roi) {
    const int64_t k = i / per_roi, bin = i % per_roi / samples, sample = i % samples;
    const auto roi = sampler.roi(k);
    const BilinearSample<T> b =
        sampler.sample(roi, bin / s.pooled_w, bin % s.pooled_w, sample / s.grid_w, sample % s.grid_w);
    const bool counted = b.inside && roi.batch >= 0 && roi.batch < s.batch;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      keys[4 * i + j] = uint32_t(counted ? roi.batch * plane + b.offset[j] : s.pixels());
      numbers[4 * i + j] = uint32_t(4 * i + j);
      weights[4 * i + j] = b.weight[j];
    }
    if (i % per_roi == 0) divisors[k] = sampler.divisor(roi);
  }
}

// 2. The shares (K, bins, C) = dy (K, C, bins) / count, a (C x bins) -> (bins x C) transpose per RoI that
// divides by the RoI's count as the CPU does, and 3. the sort: in backward() below.

// 4. starts[p] = the first place in the sorted keys whose key is p or more, for p = 0 .. pixels (the last
// one is where the sentinels begin): a binary search per pixel, so no thread's work depends on the data. In
// the same launch each place's term is unpacked for the gather, its bin (k * bins + bin = t / (4 S)) and its
// weight laid out in sorted order, so that the gather's loads are contiguous.
template <typename T>
__global__ void runs_kernel(const uint32_t* sorted_keys, const uint32_t* sorted_numbers, const T* weights, TermShape s,
                            uint32_t* starts, uint32_t* sorted_bins, T* sorted_weights) {
  const int64_t terms = s.terms(), pixels = s.pixels();
  const uint32_t terms_per_bin = uint32_t(4 * s.samples());
  MINIDET_KERNEL_LOOP(i, max(terms, pixels + 1)) {
    if (i < terms) {
      const uint32_t t = sorted_numbers[i];
      sorted_bins[i] = t / terms_per_bin;
      sorted_weights[i] = weights[t];
    }
    if (i <= pixels) {
      int64_t lo = 0, hi = terms;  // the answer lies in [lo, hi]
      while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (int64_t(sorted_keys[mid]) < i)
          lo = mid + 1;
        else
          hi = mid;
      }
      starts[i] = uint32_t(lo);
    }
  }
}

// 5. Block = kPixelsPerBlock consecutive pixels of the stacked map x 32 channels, one warp per pixel. A warp
// loads its next 32 terms while it adds the current ones, and loads the shares of kInFlight terms before it
// adds any of them, so the loads overlap and only the additions wait on each other. (Small blocks: the work
// items of a small map come to about two per warp slot of the GPU, and small blocks leave a short tail.)
constexpr int kPixelsPerBlock = 8;
constexpr int kInFlight = 8;  // 16 measured no faster

template <typename T>
__global__ void __launch_bounds__(kPixelsPerBlock* kLanes)
    gather_kernel(const uint32_t* starts, const uint32_t* sorted_bins, const T* sorted_weights, const T* shares,
                  T* grad_input, TermShape s) {
  __shared__ T sums[kLanes][kPixelsPerBlock + 1];  // (channel lane, pixel), +1 against bank conflicts
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  const int64_t groups = (s.channels + kLanes - 1) / kLanes;
  const int64_t pixel_blocks = (s.pixels() + kPixelsPerBlock - 1) / kPixelsPerBlock, plane = s.height * s.width;
  for (int64_t item = blockIdx.x; item < pixel_blocks * groups; item += gridDim.x) {
    const int64_t first_pixel = item / groups * kPixelsPerBlock, c0 = item % groups * kLanes;
    const int64_t c = min(c0 + lane, s.channels - 1);  // idle lanes read channel C - 1 and write nothing
    const int64_t p = first_pixel + warp;
    T acc = T(0);
    if (p < s.pixels()) {
      const uint32_t begin = starts[p], end = starts[p + 1];
      uint32_t next_bin = 0;  // lane u: term base + u's bin (k * bins + bin) and weight, one group ahead
      T next_weight = T(0);
      if (begin + lane < end) {
        next_bin = sorted_bins[begin + lane];
        next_weight = sorted_weights[begin + lane];
      }
      for (uint32_t base = begin; base < end; base += kLanes) {
        const uint32_t count = min(end - base, uint32_t(kLanes));
        const uint32_t my_bin = next_bin;
        const T my_weight = next_weight;
        if (base + kLanes + lane < end) {
          next_bin = sorted_bins[base + kLanes + lane];
          next_weight = sorted_weights[base + kLanes + lane];
        }
        for (uint32_t u0 = 0; u0 < count; u0 += kInFlight) {
          T share[kInFlight], weight[kInFlight];
#pragma unroll
          for (int v = 0; v < kInFlight; ++v) {
            const int src = int(min(u0 + uint32_t(v), count - 1));
            const uint32_t bin = __shfl_sync(0xffffffffu, my_bin, src);
            weight[v] = __shfl_sync(0xffffffffu, my_weight, src);
            share[v] = shares[int64_t(bin) * s.channels + c];
          }
#pragma unroll
          for (int v = 0; v < kInFlight; ++v)
            if (u0 + uint32_t(v) < count) acc = acc + unfused_mul(share[v], weight[v]);
        }
      }
    }
    sums[lane][warp] = acc;
    __syncthreads();
    // Write out, the block's 32 channels x kPixelsPerBlock pixels: thread i takes channel i / kPixelsPerBlock
    // and pixel i % kPixelsPerBlock, so each store covers runs of consecutive pixels of a channel (split
    // where the block crosses from one image into the next).
    const int channel = threadIdx.x / kPixelsPerBlock, pixel = threadIdx.x % kPixelsPerBlock;
    const int64_t out_pixel = first_pixel + pixel;
    if (c0 + channel < s.channels && out_pixel < s.pixels()) {
      const int64_t n = out_pixel / plane, offset = out_pixel % plane;
      grad_input[(n * s.channels + c0 + channel) * plane + offset] = sums[channel][pixel];
    }
    __syncthreads();  // `sums` is reused by the next item
  }
}

// ---- the launcher: call it inside MINIDET_DISPATCH_FLOATING with T = scalar_t, when fits() -----------------

// grad_input (N, C, H, W) is written whole from grad_output (K, C, pooled_h, pooled_w); both contiguous.
template <typename T, typename Sampler>
void backward(const Tensor& grad_output, const Sampler& sampler, const TermShape& s, const Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  const cudaStream_t stream = cuda::current_stream();
  const int64_t terms = s.terms();
  const TensorOptions bytes(kUInt8, grad_input.device());
  // minidet has no uint32 dtype: keys, numbers and starts live in raw bytes (every block is aligned).
  const Tensor keys = empty({2 * terms * int64_t(sizeof(uint32_t))}, bytes);
  const Tensor numbers = empty({2 * terms * int64_t(sizeof(uint32_t))}, bytes);
  const Tensor starts = empty({(s.pixels() + 1) * int64_t(sizeof(uint32_t))}, bytes);
  const Tensor weights = empty({terms}, grad_input.options());
  const Tensor divisors = empty({s.rois}, grad_input.options());
  const Tensor shares = empty({s.rois, s.bins(), s.channels}, grad_input.options());
  uint32_t* key_data = static_cast<uint32_t*>(keys.raw_data());
  uint32_t* number_data = static_cast<uint32_t*>(numbers.raw_data());

  terms_kernel<T, Sampler><<<cuda::blocks_for(terms / 4), cuda::kThreadsPerBlock, 0, stream>>>(
      sampler, s, key_data, number_data, weights.data<T>(), divisors.data<T>());
  MINIDET_CUDA_LAUNCH_CHECK("roi_sorted terms_kernel");
  roi_nhwc::transpose<T, true>(grad_output.data<T>(), shares.data<T>(), s.rois, s.channels, s.bins(),
                               divisors.data<T>());

  // Keys run from 0 to pixels (the sentinel).
  cub::DoubleBuffer<uint32_t> key_buffers(key_data, key_data + terms);
  cub::DoubleBuffer<uint32_t> number_buffers(number_data, number_data + terms);
  radix_sort_pairs(key_buffers, number_buffers, terms, uint64_t(s.pixels()), grad_input.device());

  // The unpacked bins take the keys' spare half.
  uint32_t* start_data = static_cast<uint32_t*>(starts.raw_data());
  uint32_t* sorted_bins = key_buffers.Alternate();
  const Tensor sorted_weights = empty({terms}, grad_input.options());
  runs_kernel<T><<<cuda::blocks_for(std::max(terms, s.pixels() + 1)), cuda::kThreadsPerBlock, 0, stream>>>(
      key_buffers.Current(), number_buffers.Current(), weights.data<T>(), s, start_data, sorted_bins,
      sorted_weights.data<T>());
  MINIDET_CUDA_LAUNCH_CHECK("roi_sorted runs_kernel");
  const int64_t items = (s.pixels() + kPixelsPerBlock - 1) / kPixelsPerBlock * ((s.channels + kLanes - 1) / kLanes);
  gather_kernel<T><<<cuda::blocks_for(items, 1), kPixelsPerBlock * kLanes, 0, stream>>>(
      start_data, sorted_bins, sorted_weights.data<T>(), shares.data<T>(), grad_input.data<T>(), s);
  MINIDET_CUDA_LAUNCH_CHECK("roi_sorted gather_kernel");
}

}  // namespace minidet::ops::detail::roi_sorted
