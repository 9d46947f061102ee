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
//                        that a team's lanes read one contiguous run of channels per term.
//   3. a stable radix sort of (key, t) by key (cub::DeviceRadixSort; LSD radix sorts keep equal keys in
//                        input order): each pixel's terms now lie together, in the order of t.
//   4. runs_kernel       where each pixel's run of terms starts in the sorted list, and each place's bin
//                        (k * bins + bin = t / (4 S)) and weight, laid out in sorted order.
//   5. gather_kernel     a team of lanes per pixel, each lane a 16-byte vector of channels (4 in float32;
//                        one channel where no vector divides C):
//                        the team walks the pixel's run in order, L terms at a time (lane u loads term u's
//                        bin and weight, shuffles hand them round), and each lane adds share * w for its
//                        channels. A block takes a 2-D tile of pixels, so that the shares one pixel's run
//                        reads are mostly read again by its neighbours' runs from L1. Then the tile goes out
//                        through shared memory, in runs along the rows of dx.
//
// Each element starts from 0 and receives its terms in the order of t, with unfused products as on the CPU:
// the CPU's bits, every run. The cost is a sort of 4 * K * bins * S keys and one pass over the terms per
// team's channels, whatever the size of the map. A pixel's run is summed in order by one team, so the
// longest run is the gather's critical path: on small maps with many RoIs a run holds hundreds of terms.
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
#include "ops/common/vectors.cuh"
#include "ops/roi_align/roi_align_kernels.h"  // unfused_mul
#include "ops/roi_align/roi_align_nhwc.cuh"   // roi_nhwc::transpose

namespace minidet::ops::detail::roi_sorted {

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
  // fits() bounds the terms by 2^26, so every index here fits 32 bits.
  const uint32_t samples = uint32_t(s.samples()), per_roi = uint32_t(s.bins()) * samples;
  const uint32_t pooled_w = uint32_t(s.pooled_w), grid_w = uint32_t(s.grid_w), plane = uint32_t(s.height * s.width);
  const uint32_t sentinel = uint32_t(s.pixels()), count = uint32_t(s.rois) * per_roi;
  MINIDET_KERNEL_LOOP_AS(uint32_t, i, count) {
    const uint32_t k = i / per_roi, within = i - k * per_roi, bin = within / samples, sample = within - bin * samples;
    const auto roi = sampler.roi(k);
    const BilinearSample<T> b = sampler.sample(roi, bin / pooled_w, bin % pooled_w, sample / grid_w, sample % grid_w);
    const bool counted = b.inside && roi.batch >= 0 && roi.batch < s.batch;
    const uint32_t image = counted ? uint32_t(roi.batch) * plane : 0;
    T w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) w[j] = b.weight[j];
    *reinterpret_cast<uint4*>(keys + 4 * size_t(i)) =
        counted ? make_uint4(image + uint32_t(b.offset[0]), image + uint32_t(b.offset[1]),
                             image + uint32_t(b.offset[2]), image + uint32_t(b.offset[3]))
                : make_uint4(sentinel, sentinel, sentinel, sentinel);
    *reinterpret_cast<uint4*>(numbers + 4 * size_t(i)) = make_uint4(4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3);
    vectors::store_vector<4>(weights + 4 * size_t(i), w);
    if (within == 0) divisors[k] = sampler.divisor(roi);
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

// 5. A block takes a tile of TH x TW pixels of one image and G = L * V channels; a team of L lanes per
// pixel, lane l holding channels l * V .. l * V + V - 1 of the block's G. The team loads its next L terms'
// bins and weights while it adds the current ones, and loads the shares of kInFlight terms before it adds
// any of them, so the loads overlap and only the additions wait on each other.
constexpr int kInFlight = 8;

template <typename T, int V, int L, int TH, int TW>
__global__ void __launch_bounds__(TH* TW* L)
    gather_kernel(const uint32_t* starts, const uint32_t* sorted_bins, const T* sorted_weights, const T* shares,
                  T* grad_input, TermShape s) {
  constexpr int P = TH * TW, G = L * V;
  static_assert(32 % L == 0 && P * L % 32 == 0, "a team lies within a warp and the block is whole warps");
  __shared__ T sums[G][P + 1];  // (channel, pixel), +1 against bank conflicts
  const int lane = threadIdx.x % L, pixel = threadIdx.x / L;
  // The team's lanes within the warp: the teams of a warp walk runs of different lengths.
  const unsigned team = L == 32 ? 0xffffffffu : ((1u << L) - 1u) << (threadIdx.x % 32 / L * L);
  const int64_t groups = (s.channels + G - 1) / G, plane = s.height * s.width;
  const int64_t tiles_x = (s.width + TW - 1) / TW, tiles_y = (s.height + TH - 1) / TH;
  for (int64_t item = blockIdx.x; item < s.batch * tiles_y * tiles_x * groups; item += gridDim.x) {
    const int64_t group = item % groups, tile = item / groups;
    const int64_t tx = tile % tiles_x, ty = tile / tiles_x % tiles_y, n = tile / (tiles_x * tiles_y);
    const int64_t y = ty * TH + pixel / TW, x = tx * TW + pixel % TW;
    // Lanes past the last channel read the last vector (every lane must take the team's shuffles) and
    // write nothing. C is a multiple of V (the launcher's rule), so every vector is aligned.
    const int64_t c = min(group * G + lane * V, s.channels - V);
    T acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = T(0);
    if (y < s.height && x < s.width) {
      const int64_t p = n * plane + y * s.width + x;
      const uint32_t begin = starts[p], end = starts[p + 1];
      uint32_t next_bin = 0;  // lane u: term base + u's bin (k * bins + bin) and weight, one round ahead
      T next_weight = T(0);
      if (begin + lane < end) {
        next_bin = sorted_bins[begin + lane];
        next_weight = sorted_weights[begin + lane];
      }
      for (uint32_t base = begin; base < end; base += L) {
        const uint32_t count = min(end - base, uint32_t(L));
        const uint32_t my_bin = next_bin;
        const T my_weight = next_weight;
        if (base + L + lane < end) {
          next_bin = sorted_bins[base + L + lane];
          next_weight = sorted_weights[base + L + lane];
        }
        for (uint32_t u0 = 0; u0 < count; u0 += kInFlight) {
          T share[kInFlight][V], weight[kInFlight];
#pragma unroll
          for (int v = 0; v < kInFlight; ++v) {
            const int src = int(min(u0 + uint32_t(v), count - 1));
            const uint32_t bin = __shfl_sync(team, my_bin, src, L);
            weight[v] = __shfl_sync(team, my_weight, src, L);
            vectors::load_vector<V>(shares + int64_t(bin) * s.channels + c, share[v]);
          }
#pragma unroll
          for (int v = 0; v < kInFlight; ++v)
            if (u0 + uint32_t(v) < count) {
#pragma unroll
              for (int i = 0; i < V; ++i) acc[i] = acc[i] + unfused_mul(share[v][i], weight[v]);
            }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < V; ++i) sums[lane * V + i][pixel] = acc[i];
    __syncthreads();
    // Write out, G channels x P pixels: entry e is channel e / P, pixel e % P, so each store covers the
    // tile's rows of consecutive pixels of a channel.
    for (int e = threadIdx.x; e < G * P; e += P * L) {
      const int channel = e / P, at = e % P;
      const int64_t oy = ty * TH + at / TW, ox = tx * TW + at % TW, oc = group * G + channel;
      if (oy < s.height && ox < s.width && oc < s.channels)
        grad_input[((n * s.channels + oc) * s.height + oy) * s.width + ox] = sums[channel][at];
    }
    __syncthreads();  // `sums` is reused by the next item
  }
}

template <typename T, int V, int L, int TH, int TW>
void launch_gather(const uint32_t* starts, const uint32_t* sorted_bins, const T* sorted_weights, const T* shares,
                   T* grad_input, const TermShape& s, cudaStream_t stream) {
  constexpr int G = L * V;
  const int64_t items = s.batch * ((s.height + TH - 1) / TH) * ((s.width + TW - 1) / TW) * ((s.channels + G - 1) / G);
  gather_kernel<T, V, L, TH, TW><<<cuda::blocks_for(items, 1), TH * TW * L, 0, stream>>>(
      starts, sorted_bins, sorted_weights, shares, grad_input, s);
  MINIDET_CUDA_LAUNCH_CHECK("roi_sorted gather_kernel");
}

// The team's shape. A lane takes a 16-byte vector of channels when C allows it, else one channel (32-lane
// teams, the tile a row of 8 pixels). Long runs (many terms a pixel: many RoIs on a small map) take teams of
// 16 lanes, 64 float32 channels, and 4 x 4 tiles: a term's bin and weight then serve twice the channels, and
// a warp holds two runs instead of four, so it waits on fewer runs longer than its own. Short runs take teams
// of 8 lanes and 4 x 8 tiles, whose larger tiles share more of the shares through L1 (docs/benchmarks.md).
template <typename T>
void gather(const uint32_t* starts, const uint32_t* sorted_bins, const T* sorted_weights, const T* shares,
            T* grad_input, const TermShape& s, cudaStream_t stream) {
  constexpr int V = 16 / sizeof(T);
  constexpr int64_t kLongRun = 64;  // mean terms a pixel (the sentinels' terms counted too: a speed choice only)
  if (s.channels % V != 0)
    launch_gather<T, 1, 32, 1, 8>(starts, sorted_bins, sorted_weights, shares, grad_input, s, stream);
  else if (s.terms() >= kLongRun * s.pixels())
    launch_gather<T, V, 16, 4, 4>(starts, sorted_bins, sorted_weights, shares, grad_input, s, stream);
  else
    launch_gather<T, V, 8, 4, 8>(starts, sorted_bins, sorted_weights, shares, grad_input, s, stream);
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
  gather<T>(start_data, sorted_bins, sorted_weights.data<T>(), shares.data<T>(), grad_input.data<T>(), s, stream);
}

}  // namespace minidet::ops::detail::roi_sorted
