// The axis-aligned RoIAlign average in separable form on the GPU: its forward and its fast input gradient,
// for up to 7 x 7 bins (roi_align_separable.h has the math). Per RoI and channel, with A (H x pooled_h) and
// B (W x pooled_w) the bins' bilinear taps along each axis,
//
//   forward    Y  = Aᵀ · X · B / count
//   backward   dX = A · (dY / count) · Bᵀ
//
// A and B are the same for all channels and mostly zero: a map row takes taps from one or two bin rows. So
// a RoI costs one pass over the pixels that have a tap in both directions (its "tap rows" and "tap columns";
// at most the 2 * pooled * grid sample rows' neighbours, and never more than the RoI's footprint), instead
// of locating every sample and reading or adding at its four neighbours for every channel. On a detector's
// small maps a RoI covers a few dozen pixels against 196 samples of 4 neighbours.
//
// Work split: a warp takes one (RoI, slab of 32 channels) at a time, lane l channel slab * 32 + l (NHWC, so
// the lanes of one pixel are one 128-byte line). It builds the RoI's A and B in its own scratch in shared
// memory (lane p bin row p, lane q bin column q, so no two lanes add to one entry), lists the tap rows and
// columns, then each lane runs the products for its channel, with the loops over 7 x 7 bins unrolled (bins
// past pooled_h or pooled_w have zero taps): dY in registers in the backward, the output's sums in the lane's
// column of a shared stage in the forward.
//
//   forward_separable_kernel   reads X (NHWC) at the tap pixels; stages each RoI's (slab, bins) output block
//                              through shared memory so the stores are coalesced.
//   backward_separable_kernel  adds dX into a private copy of one image's map in shared memory and merges it
//                              as roi_align_backward.cuh's backward_map_kernel does (the same MapLane and
//                              merge_map): block = (a chunk of consecutive RoIs, a slab), its warps taking
//                              the chunk's images in turn. Warps on different RoIs of one image add to
//                              overlapping pixels, hence shared atomics; a RoI adds each pixel once.
//   backward_separable_global_kernel  where the map does not fit beside the scratch: a warp per item, as the
//                              forward, adding each pixel once per RoI straight into global memory.
//
// The sums come in another order than the per-sample kernels' (and the CPU's), so the last bits differ;
// DeterministicMode keeps the CPU's order with roi_align_sorted.cuh. A product over zero taps is skipped when
// its value is not finite (Inf * 0 is NaN): a NaN pixel reaches only the bins whose samples read it, and a
// NaN bin of dY only the pixels its samples read, as in the per-sample kernels, never a whole tap row.
//
// float64 at 7x7 bins never fits (its stage alone is 52 KB for four warps), so a box head in float64 runs the
// per-sample kernels; smaller bins, or float32, take these.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/factories.h"
#include "ops/roi_align/roi_align_backward.cuh"  // MapLane, MapLayout, merge_map, map_chunks, opt_in_to_map_cap, transpose
#include "ops/roi_align/roi_align_kernels.h"
#include "ops/roi_align/roi_align_separable.h"

namespace minidet::ops::detail::roi_separable {

using roi_nhwc::kLanes;
constexpr int kMaxPooled = 7;          // bins per axis these kernels are compiled for
constexpr int kTapStride = 8;          // a row of A or B: kMaxPooled taps, padded for 16-byte loads
constexpr int kStageRow = kLanes + 1;  // a (bin, lane) row of the stage: 33 keeps lanes on 32 banks
constexpr int kSharedMapWarps = 8;     // backward_separable_kernel: warps sharing a block's map
constexpr int kItemWarps = 4;          // the kernels without a map: warps of a block, each on its own items

// A warp's scratch, in T: A (H x kTapStride), B (W x kTapStride), then the stage of dY or Y, (bins x 33);
// rounded up to 4 values so that every warp's A starts 16-byte aligned. After all warps' T scratch, each
// warp's lists of tap rows and tap columns (H + W ints). The backward puts its map (H * W pixels x 32
// channels) before all of it.
struct SeparableLayout {
  int height, width, pooled_h, pooled_w, warps;
  int64_t map_values;  // 0 in the forward
  SeparableLayout(const RoiAlignGeometry& g, int warps_, bool with_map)
      : height(int(g.height)), width(int(g.width)), pooled_h(int(g.pooled_h)), pooled_w(int(g.pooled_w)),
        warps(warps_), map_values(with_map ? g.height * g.width * kLanes : 0) {}
  __host__ __device__ int scratch_values() const {
    return ((height + width) * kTapStride + pooled_h * pooled_w * kStageRow + 3) / 4 * 4;
  }
  template <typename T>
  size_t bytes() const {
    return size_t(map_values + int64_t(warps) * scratch_values()) * sizeof(T) +
           size_t(warps) * size_t(height + width) * sizeof(int);
  }
};

// Whether the kernels take this geometry: an average of at most 7 x 7 bins on a small map. The kernels
// without a map (the forward, and the backward's global form) need a block within the default 48 KB, so
// that four to six blocks share a multiprocessor; backward_separable_kernel's block (map and scratch) must fit
// the cap that leaves room for two (map_bytes_cap). Larger maps are ones whose RoIs cover hundreds of pixels:
// a RoI then reads about as many pixels as the per-sample kernels do, with fewer warps to wait on them (on a
// 200 x 272 map of 256 channels the separable forward took 3.8 ms against the per-sample kernel's 0.64:
// docs/benchmarks.md).
template <typename T>
bool small_average(const RoiAlignGeometry& g, int warps, bool with_map) {
  const size_t cap = with_map ? roi_nhwc::map_bytes_cap() : size_t(48) << 10;
  // The kernels index pixels of one image in int (SeparableLayout holds H and W as int).
  if (g.max_mode || g.pooled_h > kMaxPooled || g.pooled_w > kMaxPooled || g.height * g.width >= (int64_t(1) << 31))
    return false;
  return SeparableLayout(g, warps, with_map).bytes<T>() <= cap;
}
template <typename T>
bool forward_fits(const RoiAlignGeometry& g) {
  return small_average<T>(g, kItemWarps, false);
}
template <typename T>
bool backward_fits(const RoiAlignGeometry& g) {
  return small_average<T>(g, kSharedMapWarps, true) || small_average<T>(g, kItemWarps, false);
}

// This warp's part of the dynamic shared memory.
template <typename T>
struct WarpScratch {
  T* A;      // (H, kTapStride)
  T* B;      // (W, kTapStride)
  T* stage;  // (bins, kStageRow)
  int* rows;
  int* cols;
  __device__ WarpScratch(unsigned char* smem, const SeparableLayout& s, int warp) {
    T* base = reinterpret_cast<T*>(smem) + s.map_values;
    A = base + int64_t(warp) * s.scratch_values();
    B = A + s.height * kTapStride;
    stage = B + s.width * kTapStride;
    rows = reinterpret_cast<int*>(base + int64_t(s.warps) * s.scratch_values()) + warp * (s.height + s.width);
    cols = rows + s.height;
  }
};

// The 8 values of a row of A or B, in 16-byte loads (the row is 16-byte aligned: kTapStride and the layout).
template <typename T>
__device__ __forceinline__ void load_taps(const T* row, T (&out)[kTapStride]) {
  using Vec = typename std::conditional<sizeof(T) == 4, float4, double2>::type;
  constexpr int kPerVec = int(sizeof(Vec) / sizeof(T));
#pragma unroll
  for (int i = 0; i < kTapStride / kPerVec; ++i) {
    const Vec v = reinterpret_cast<const Vec*>(row)[i];
    memcpy(&out[i * kPerVec], &v, sizeof(Vec));
  }
}

// The indices i < n whose row (kTapStride values at taps + i * kTapStride) has a non-zero tap, in increasing
// order, into list; returns how many. The whole warp calls it.
template <typename T>
__device__ int list_tap_rows(const T* taps, int n, int* list, int lane) {
  int count = 0;
  for (int base = 0; base < n; base += kLanes) {
    const int i = base + lane;
    bool has = false;
    if (i < n)
#pragma unroll
      for (int j = 0; j < kTapStride; ++j) has |= taps[i * kTapStride + j] != T(0);
    const unsigned ballot = __ballot_sync(0xffffffffu, has);
    if (has) list[count + __popc(ballot & ((1u << lane) - 1u))] = i;
    count += __popc(ballot);
  }
  return count;
}

// Visits entry e = lane, lane + 32, ... < channels * bins of a RoI's (channel, bin) block, with its channel
// and bin (e = channel * bins + bin) counted along instead of divided out: an integer division by a runtime
// value costs some twenty instructions.
template <typename Visit>
__device__ __forceinline__ void for_each_block_entry(int channels, int bins, int lane, Visit&& visit) {
  int channel = 0, bin = lane;
  while (bin >= bins) bin -= bins, ++channel;
  for (int e = lane; e < channels * bins; e += kLanes) {
    visit(e, channel, bin);
    bin += kLanes;
    while (bin >= bins) bin -= bins, ++channel;
  }
}

struct TapCounts {
  int rows, cols;
};

// Builds RoI `box`'s A and B in the warp's scratch and lists its tap rows and columns. The whole warp calls
// it; the scratch is the warp's own, so __syncwarp orders it.
template <typename T>
__device__ TapCounts build_taps(const WarpScratch<T>& w, const SeparableLayout& s, const RoiBox<T>& box, int lane) {
  __syncwarp();  // every lane is done with the warp's previous RoI
  for (int e = lane; e < (s.height + s.width) * kTapStride; e += kLanes) w.A[e] = T(0);  // A and B are adjacent
  __syncwarp();
  for (int p = lane; p < s.pooled_h; p += kLanes)
    for_each_bin_tap(box.start_y, box.roi_h, box.grid_h, int64_t(s.pooled_h), int64_t(p), int64_t(s.height),
                     [&](int64_t row, T weight) { w.A[int(row) * kTapStride + p] += weight; });
  for (int q = lane; q < s.pooled_w; q += kLanes)
    for_each_bin_tap(box.start_x, box.roi_w, box.grid_w, int64_t(s.pooled_w), int64_t(q), int64_t(s.width),
                     [&](int64_t col, T weight) { w.B[int(col) * kTapStride + q] += weight; });
  __syncwarp();
  TapCounts n;
  n.rows = list_tap_rows(w.A, s.height, w.rows, lane);
  n.cols = list_tap_rows(w.B, s.width, w.cols, lane);
  __syncwarp();
  return n;
}

// ---- forward ------------------------------------------------------------------------------------------------

// Per tap row y: r_q = sum_x X[y, x] B[x, q] over the tap columns (registers), then acc[p][q] += A[y, p] r_q
// for the one or two bin rows p with a tap on y (the test is the same in all lanes). acc is the lane's
// column of the stage, in shared memory rather than 49 registers, so that up to six blocks (24 warps; four
// when a block's scratch is over about 37 KB) share a multiprocessor to hide the latency of the reads of X.
template <typename T>
__global__ void __launch_bounds__(kItemWarps* kLanes, sizeof(T) == 4 ? 6 : 4)
    forward_separable_kernel(const T* input_nhwc, const T* rois, RoiAlignGeometry g, SeparableLayout s, T* output) {
  extern __shared__ __align__(16) unsigned char forward_smem[];
  const int warp = int(threadIdx.x) / kLanes, lane = int(threadIdx.x) % kLanes;
  const WarpScratch<T> w(forward_smem, s, warp);
  const int64_t slabs = (g.channels + kLanes - 1) / kLanes, items = g.rois * slabs;
  const int bins = s.pooled_h * s.pooled_w;
  for (int64_t item = int64_t(blockIdx.x) * kItemWarps + warp; item < items;
       item += int64_t(gridDim.x) * kItemWarps) {
    const int64_t k = item / slabs, c0 = (item - k * slabs) * kLanes;
    const int slab_channels = int(min(int64_t(kLanes), g.channels - c0));
    const bool mine = lane < slab_channels;
    const RoiBox<T> box = roi_box(rois + k * 5, g);
    const TapCounts n = build_taps(w, s, box, lane);  // begins with __syncwarp: the last item's stage is read
    T* acc = w.stage + lane;                          // acc[bin * kStageRow]
    for (int bin = 0; bin < bins; ++bin) acc[bin * kStageRow] = T(0);
    const T* x = input_nhwc + box.batch * g.height * g.width * g.channels + c0 + lane;
    for (int i = 0; i < n.rows; ++i) {
      const int row = w.rows[i];
      const T* x_row = x + int64_t(row) * s.width * g.channels;
      T r[kTapStride];
#pragma unroll
      for (int q = 0; q < kTapStride; ++q) r[q] = T(0);
#pragma unroll 4
      for (int j = 0; j < n.cols; ++j) {
        const int col = w.cols[j];
        const T v = mine ? x_row[int64_t(col) * g.channels] : T(0);
        T b[kTapStride];
        load_taps(w.B + col * kTapStride, b);
        if (isfinite(v)) {
#pragma unroll
          for (int q = 0; q < kMaxPooled; ++q) r[q] += v * b[q];
        } else {  // only the bins with a tap on this column (see the top)
#pragma unroll
          for (int q = 0; q < kMaxPooled; ++q)
            if (b[q] != T(0)) r[q] += v * b[q];
        }
      }
      T a[kTapStride];
      load_taps(w.A + row * kTapStride, a);
#pragma unroll
      for (int p = 0; p < kMaxPooled; ++p) {
        if (a[p] == T(0)) continue;
#pragma unroll
        for (int q = 0; q < kMaxPooled; ++q)
          if (q < s.pooled_w) acc[(p * s.pooled_w + q) * kStageRow] += a[p] * r[q];
      }
    }
    // The RoI's (slab, bins) block of the output is contiguous: store it coalesced from the stage.
    __syncwarp();
    const T divisor = T(box.count());
    T* out = output + (k * g.channels + c0) * bins;
    for_each_block_entry(slab_channels, bins, lane,
                         [&](int e, int channel, int bin) { out[e] = w.stage[bin * kStageRow + channel] / divisor; });
  }
}

// output (K, C, ph, pw) from input (N, C, H, W) and rois (K, 5); all contiguous. As roi_nhwc::forward: one
// transpose of the input to NHWC first.
template <typename T>
void forward(const Tensor& input, const Tensor& rois, const RoiAlignGeometry& g, const Tensor& output,
             const char* kernel_name) {
  if (output.numel() == 0) return;
  const SeparableLayout s(g, kItemWarps, false);
  Tensor input_nhwc = empty({g.batch, g.height, g.width, g.channels}, input.options());
  roi_nhwc::transpose(input.data<T>(), input_nhwc.data<T>(), g.batch, g.channels, g.height * g.width);
  const int64_t items = g.rois * ((g.channels + kLanes - 1) / kLanes);
  const int64_t blocks = std::min<int64_t>((items + kItemWarps - 1) / kItemWarps, int64_t(1) << 30);
  const size_t bytes = s.bytes<T>();  // within the default 48 KB (forward_fits)
  forward_separable_kernel<T><<<unsigned(blocks), kItemWarps * kLanes, bytes, cuda::current_stream()>>>(
      input_nhwc.data<T>(), rois.data<T>(), g, s, output.data<T>());
  MINIDET_CUDA_LAUNCH_CHECK(kernel_name);
}

// ---- backward -----------------------------------------------------------------------------------------------

// A warp's whole gradient of RoI k: dY / count into registers (through the stage, read coalesced), then per
// tap column x: t_p = sum_q dY[p, q] B[x, q], and per tap row y: dX[y, x] = sum_p A[y, p] t_p, handed to
// add(pixel, value) (lanes with a channel, non-zero values).
template <typename T, typename Add>
__device__ void add_roi_separable(const WarpScratch<T>& w, const SeparableLayout& s, const RoiBox<T>& box,
                                  const T* dy, int slab_channels, int lane, Add&& add) {
  const int bins = s.pooled_h * s.pooled_w;
  const TapCounts n = build_taps(w, s, box, lane);
  const T divisor = T(box.count());
  for_each_block_entry(slab_channels, bins, lane,
                       [&](int e, int channel, int bin) { w.stage[bin * kStageRow + channel] = dy[e] / divisor; });
  __syncwarp();
  const bool mine = lane < slab_channels;
  T share[kMaxPooled][kMaxPooled];
#pragma unroll
  for (int p = 0; p < kMaxPooled; ++p)
#pragma unroll
    for (int q = 0; q < kMaxPooled; ++q)
      share[p][q] = mine && p < s.pooled_h && q < s.pooled_w ? w.stage[(p * s.pooled_w + q) * kStageRow + lane] : T(0);
  // A lane with a non-finite share skips the products over zero taps (see the top); the others need not test.
  bool finite = true;
#pragma unroll
  for (int p = 0; p < kMaxPooled; ++p)
#pragma unroll
    for (int q = 0; q < kMaxPooled; ++q) finite &= bool(isfinite(share[p][q]));
  for (int j = 0; j < n.cols; ++j) {
    const int col = w.cols[j];
    T b[kTapStride];
    load_taps(w.B + col * kTapStride, b);
    T t[kMaxPooled];
#pragma unroll
    for (int p = 0; p < kMaxPooled; ++p) {
      t[p] = T(0);
#pragma unroll
      for (int q = 0; q < kMaxPooled; ++q)
        if (finite || b[q] != T(0)) t[p] += share[p][q] * b[q];
    }
    for (int i = 0; i < n.rows; ++i) {
      const int row = w.rows[i];
      T a[kTapStride];
      load_taps(w.A + row * kTapStride, a);
      T value = T(0);
#pragma unroll
      for (int p = 0; p < kMaxPooled; ++p)
        if (finite || a[p] != T(0)) value += a[p] * t[p];
      if (mine && value != T(0)) add(row * s.width + col, value);
    }
  }
}

// Two blocks per multiprocessor in float32; float64's 49 shares take twice the registers, so one.
template <typename T>
__global__ void __launch_bounds__(kSharedMapWarps* kLanes, sizeof(T) == 4 ? 2 : 1)
    backward_separable_kernel(int64_t rois_per_block, const T* grad_output, const T* rois, RoiAlignGeometry g,
                              T* grad_nhwc, SeparableLayout s, roi_nhwc::MapLayout layout) {
  extern __shared__ __align__(16) unsigned char backward_smem[];
  T* map = reinterpret_cast<T*>(backward_smem);
  const int warp = int(threadIdx.x) / kLanes;
  const WarpScratch<T> w(backward_smem, s, warp);
  __shared__ int span[2];
  const int64_t slabs = (g.channels + kLanes - 1) / kLanes, bins = g.bins();
  const int64_t c0 = blockIdx.x % slabs * kLanes;
  const int64_t slab_channels = min(int64_t(kLanes), g.channels - c0);
  roi_nhwc::MapLane<1> me{int(threadIdx.x % kLanes), slab_channels, int(layout.plane), -1};
  const int64_t first = int64_t(blockIdx.x / slabs) * rois_per_block, last = min(first + rois_per_block, g.rois);

  for (int64_t e = threadIdx.x; e < s.map_values; e += blockDim.x) map[e] = T(0);
  if (threadIdx.x == 0) {
    span[0] = int(layout.plane);
    span[1] = -1;
  }
  __syncthreads();
  // The chunk's images in turn, smallest first; in each, its RoIs dealt to the warps.
  for (int64_t image = -1;;) {
    int64_t next = -1;
    for (int64_t k = first; k < last; ++k) {
      const int64_t b = static_cast<int64_t>(rois[k * 5]);
      if (b > image && (next < 0 || b < next)) next = b;
    }
    if (next < 0) break;
    image = next;
    int64_t dealt = 0;
    for (int64_t k = first; k < last; ++k) {
      if (static_cast<int64_t>(rois[k * 5]) != image || dealt++ % kSharedMapWarps != warp) continue;
      add_roi_separable(w, s, roi_box(rois + k * 5, g), grad_output + (k * g.channels + c0) * bins,
                        int(slab_channels), me.lane, [&](int pixel, T value) {
                          atomicAdd(map + pixel * kLanes + me.lane, value);
                          me.lo = min(me.lo, pixel);
                          me.hi = max(me.hi, pixel);
                        });
    }
    roi_nhwc::merge_map(map, layout, me, span, grad_nhwc + image * layout.plane * g.channels + c0, g.channels);
  }
}

// Maps too large to copy beside the scratch: each warp takes its own (RoI, slab) items, as the forward does,
// and adds dX straight into the NHWC gradient in global memory, one atomic per lane and tap pixel (the warp's
// 32 channels of a pixel are adjacent: one 128-byte line in float32): still each pixel once per RoI, where
// the per-sample kernel adds four neighbours of every sample.
template <typename T>
__global__ void __launch_bounds__(kItemWarps* kLanes, sizeof(T) == 4 ? 4 : 2)
    backward_separable_global_kernel(const T* grad_output, const T* rois, RoiAlignGeometry g, SeparableLayout s,
                                     T* grad_nhwc) {
  extern __shared__ __align__(16) unsigned char global_smem[];
  const int warp = int(threadIdx.x) / kLanes, lane = int(threadIdx.x) % kLanes;
  const WarpScratch<T> w(global_smem, s, warp);
  const int64_t slabs = (g.channels + kLanes - 1) / kLanes, items = g.rois * slabs, bins = g.bins();
  for (int64_t item = int64_t(blockIdx.x) * kItemWarps + warp; item < items; item += int64_t(gridDim.x) * kItemWarps) {
    const int64_t k = item / slabs, c0 = (item - k * slabs) * kLanes;
    const RoiBox<T> box = roi_box(rois + k * 5, g);
    T* image = grad_nhwc + box.batch * g.height * g.width * g.channels + c0 + lane;
    add_roi_separable(w, s, box, grad_output + (k * g.channels + c0) * bins,
                      int(min(int64_t(kLanes), g.channels - c0)), lane,
                      [&](int pixel, T value) { atomicAdd(image + int64_t(pixel) * g.channels, value); });
  }
}

// grad_input (N, C, H, W) of RoIAlign's average is written, not accumulated, from grad_output (K, C, ph, pw)
// and rois (K, 5); all contiguous; backward_fits(g). As roi_nhwc::backward: a zeroed NHWC buffer, then one
// transpose. The map kernel where its map fits, else the global form.
template <typename T>
void backward(const Tensor& grad_output, const Tensor& rois, const RoiAlignGeometry& g, const Tensor& grad_input,
              const char* kernel_name) {
  if (grad_input.numel() == 0) return;
  if (grad_output.numel() == 0) {
    grad_input.zero_();
    return;
  }
  Tensor grad_nhwc = zeros({g.batch, g.height, g.width, g.channels}, grad_input.options());
  const int64_t slabs = (g.channels + kLanes - 1) / kLanes;
  if (small_average<T>(g, kSharedMapWarps, true)) {
    const SeparableLayout s(g, kSharedMapWarps, true);
    // Chunks of at least kSharedMapWarps RoIs (a chunk's RoIs are dealt to the warps image by image, so a chunk
    // over two images can still leave warps idle).
    const roi_nhwc::MapChunks chunks = roi_nhwc::map_chunks(g.rois, slabs, kSharedMapWarps);
    const size_t bytes = s.bytes<T>();
    cuda::opt_in_to_shared_memory(backward_separable_kernel<T>, bytes);
    backward_separable_kernel<T><<<unsigned(chunks.blocks), kSharedMapWarps * kLanes, bytes, cuda::current_stream()>>>(
        chunks.per_block, grad_output.data<T>(), rois.data<T>(), g, grad_nhwc.data<T>(), s,
        roi_nhwc::MapLayout(roi_nhwc::PoolShape{g.channels, g.height, g.width, g.pooled_h, g.pooled_w}, 1));
  } else {
    const SeparableLayout s(g, kItemWarps, false);
    const int64_t blocks = std::min<int64_t>((g.rois * slabs + kItemWarps - 1) / kItemWarps, int64_t(1) << 30);
    const size_t bytes = s.bytes<T>();  // within the default 48 KB (small_average)
    backward_separable_global_kernel<T><<<unsigned(blocks), kItemWarps * kLanes, bytes, cuda::current_stream()>>>(
        grad_output.data<T>(), rois.data<T>(), g, s, grad_nhwc.data<T>());
  }
  MINIDET_CUDA_LAUNCH_CHECK(kernel_name);
  roi_nhwc::transpose(grad_nhwc.data<T>(), grad_input.data<T>(), g.batch, g.height * g.width, g.channels);
}

}  // namespace minidet::ops::detail::roi_separable
