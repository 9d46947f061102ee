// A deterministic CUDA input gradient of both RoIAlign ops (roi_align_cuda.cu and
// ops/roi_align_rotated/roi_align_rotated_cuda.cu, under DeterministicMode: core/deterministic.h), the one
// for adaptive sampling and max mode; the average with a fixed sampling ratio takes the sorted terms of
// roi_align_sorted.cuh, which are faster on every map measured (docs/benchmarks.md). dx written
// with no atomics, each element's terms added in the CPU's order, so the bits are the same every run and the
// CPU's (for the rotated op, wherever the devices' sin and cos agree: roi_align_rotated_kernels.h).
//
// The CPU adds into d input[n, c, pixel] the terms share * w_j in this order: RoI k, bin (p, q) row-major,
// sample (iy, ix) row-major, neighbour j = 0..3; share = dy[k, c, p, q] / count (avg), or dy[k, c, p, q] for
// the bin's winning sample only (max). The GPU reproduces that order with a gather over tiles of dx, the
// plan of RoIPool's deterministic backward (ops/roi_pool/roi_pool_deterministic_cuda.cu):
//
//   Work item = (image b, tile of tile_h x tile_w pixels, 32 channels): one warp, lane = channel. The warp
//   keeps the tile's gradient for its 32 channels in shared memory, starting from 0, and walks the RoIs in
//   order k = 0..K-1, 32 at a time: each lane tests one RoI's span (the rows and columns its samples can
//   reach, from span_kernel) against the tile; a ballot keeps the hits in k order. For a hit, the sampler
//   names the samples that can reach the tile: a range of sample rows i = p*grid_h + iy and a range of
//   sample columns j = q*grid_w + ix (for the rotated op, the tile turned into the box's frame). Those
//   samples are visited in the CPU's order (p, q, iy, ix), 32 at a time: a sample's place and weights are
//   the same for every channel, so lane l locates sample l of the group, a ballot keeps the samples with a
//   neighbour in the tile, and for each, in order, shuffles hand its neighbours and weights to all lanes,
//   which add share * w_j to their channel. Max mode walks the bins of the ranges in order instead, each
//   lane locating its own channel's winning sample. Lane c alone writes channel c of the tile, so each
//   element receives its terms in the CPU's order, with the CPU's arithmetic (unfused products): the CPU's
//   bits. Then the warp writes its whole tile, zeros included, so dx needs no zero fill.
//
// Speed: a warp's work is a chain of dependent steps, so the code keeps loads in flight together. The shares
// dy / count of a group's bins (at most 32) are loaded into registers before the group's geometry and kept
// in a per-warp scratch; the next sample's shuffles are issued before the current one's additions, whose
// four shared-memory loads go out together. Tiles are as large as 48 KB of shared memory allows (16 x 16 in
// float32, 8 x 16 in float64; a RoI is then visited by few tiles) and shrink only when the work items would
// not fill the GPU (small maps).
//
// A sampler (roi_align_nhwc.cuh's roi(k), sample(...), divisor(roi)) adds two functions for the gather:
//   extent(roi)                  a MapBox holding every sample of the RoI (for span_kernel);
//   ranges(roi, reach)           the SampleRanges whose samples can lie in the map box `reach`.
// Both may be larger than exact (the neighbour test in the tile decides), never smaller.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/common/bilinear.h"
#include "ops/roi_align/roi_align_kernels.h"  // unfused_mul
#include "ops/roi_align/roi_align_nhwc.cuh"   // kLanes

namespace minidet::ops::detail::roi_gather {

using roi_nhwc::kLanes;
constexpr unsigned kAllLanes = 0xffffffffu;

// A closed box of the map, in pixels: rows y0..y1, columns x0..x1.
struct MapBox {
  double y0, y1, x0, x1;
};

// Sample rows i in [row0, row1) and sample columns j in [col0, col1) of one RoI.
struct SampleRanges {
  int64_t row0 = 0, row1 = 0, col0 = 0, col1 = 0;
  __device__ bool empty() const { return row0 >= row1 || col0 >= col1; }
};

// Samples are placed in T (float: 24 bits); extents and ranges are computed in double and widened by kSlack
// times the magnitudes involved, far above float's rounding, so they stay supersets of the exact sets.
constexpr double kSlack = 1.0 / 65536;

// The indices i in [0, n) whose position start + (i + 0.5) * step may lie in [lo, hi], as [first, last).
__device__ inline void samples_between(double start, double step, int64_t n, double lo, double hi, int64_t* first,
                                       int64_t* last) {
  double a = 0, b = double(n) - 1;  // step 0 (a zero-size box: every sample at start) or NaN: all, or none
  if (step > 0) {
    a = (lo - start) / step - 0.5;
    b = (hi - start) / step - 0.5;
  } else if (step < 0) {  // an inverted box: the samples walk backwards
    a = (hi - start) / step - 0.5;
    b = (lo - start) / step - 0.5;
  } else if (step == 0 && !(lo <= start && start <= hi)) {
    a = 1;
    b = 0;
  }
  a = ceil(fmax(a, 0.0));              // fmax/fmin drop a NaN bound: the whole axis, never garbage
  b = floor(fmin(b, double(n) - 1));
  *first = a <= b ? int64_t(a) : 0;
  *last = a <= b ? int64_t(b) + 1 : 0;
}

// The map box a RoI's samples reach: [lo, hi] along each axis, widened by the slack.
__device__ inline MapBox widened(double y_lo, double y_hi, double x_lo, double x_hi, double magnitude) {
  const double m = kSlack * (1 + magnitude);
  return {y_lo - m, y_hi + m, x_lo - m, x_hi + m};
}

// v clamped to [0, limit]; NaN gives 0 (fmax and fmin drop a NaN operand).
__device__ inline double clamp_to(double v, int64_t limit) { return fmin(fmax(v, 0.0), double(limit)); }

struct GatherShape {
  int64_t batch, rois, channels, height, width, pooled_h, pooled_w;
  __host__ __device__ int64_t bins() const { return pooled_h * pooled_w; }
};

// Rows [span.x, span.y) of the map where the N images are stacked vertically (image b's rows are b*H ..
// b*H + H - 1, so one test checks the image and the rows) and columns [span.z, span.w) that RoI k's samples
// can reach. A sample at y reads rows floor(y) and floor(y) + 1, rows 0 and 1 when y is in [-1, 0], nothing
// outside [-1, H]. A RoI that reaches nothing gets an empty span.
template <typename T, typename Sampler>
__global__ void span_kernel(Sampler sampler, int4* spans, GatherShape s) {
  MINIDET_KERNEL_LOOP(k, s.rois) {
    const auto roi = sampler.roi(k);
    const MapBox e = sampler.extent(roi);
    const bool reaches = e.y1 >= -1 && e.y0 <= double(s.height) && e.x1 >= -1 && e.x0 <= double(s.width);
    // Clamped to the map before the casts (a box may be huge).
    const int y0 = int(clamp_to(floor(e.y0), s.height)), y1 = int(clamp_to(floor(e.y1) + 3, s.height));
    const int x0 = int(clamp_to(floor(e.x0), s.width)), x1 = int(clamp_to(floor(e.x1) + 3, s.width));
    const int top = int(roi.batch * s.height);
    spans[k] = reaches && y0 < y1 && x0 < x1 ? make_int4(top + y0, top + y1, x0, x1) : make_int4(0, 0, 0, 0);
  }
}

// The order of one hit's samples: rows [row0, row1) x columns [col0, col1), visited as the CPU does, bin by
// bin (p, q) and in each bin row-major. Sample t of that order is found with a few divisions, in 32-bit
// arithmetic (type I) whenever the numbers fit. Bin rows are counted from p0 = row0 / grid_h, the first bin
// row in range (dp = p - p0), and a sample row by its place r from the first row of bin p0.
template <typename I>
struct HitOrder {
  I grid_h, grid_w;
  I p0, q0;              // the first bin row and column in range
  I row_skip, col_skip;  // row0 - p0*grid_h, col0 - q0*grid_w: the skipped samples of the first bins
  I rows, cols;          // row1 - row0, col1 - col0
  I bin_cols;            // bin columns in range
  __device__ HitOrder(const SampleRanges& r, int64_t gh, int64_t gw)
      : grid_h(I(gh)), grid_w(I(gw)), p0(I(r.row0) / grid_h), q0(I(r.col0) / grid_w), row_skip(I(r.row0) - p0 * grid_h),
        col_skip(I(r.col0) - q0 * grid_w), rows(I(r.row1 - r.row0)), cols(I(r.col1 - r.col0)),
        bin_cols((col_skip + cols - 1) / grid_w + 1) {}
  // Sample t: bin (p0 + dp, q0 + dq), (iy, ix) inside it.
  __device__ void at(I t, I* dp, I* dq, I* iy, I* ix) const {
    *dp = (row_skip + t / cols) / grid_h;
    const I row_begin = max(*dp * grid_h, row_skip), row_end = min(*dp * grid_h + grid_h, row_skip + rows);
    const I in_rows = t - (row_begin - row_skip) * cols;  // place in bin row dp's block (row_end - row_begin rows)
    const I height = row_end - row_begin;
    *dq = (col_skip + in_rows / height) / grid_w;
    const I col_begin = max(*dq * grid_w, col_skip), col_end = min(*dq * grid_w + grid_w, col_skip + cols);
    const I in_bin = in_rows - (col_begin - col_skip) * height;  // row-major in the bin's (height x width) block
    const I width = col_end - col_begin;
    *iy = row_begin - *dp * grid_h + in_bin / width;
    *ix = col_begin - *dq * grid_w + in_bin % width;
  }
};

// True when HitOrder<uint32_t> cannot overflow for these ranges.
__device__ inline bool fits_32(const SampleRanges& r, int64_t gh, int64_t gw) {
  const int64_t rows = r.row1 - r.row0, cols = r.col1 - r.col0, limit = int64_t(1) << 31;
  return r.row1 < limit && r.col1 < limit && rows + 2 * gh < limit && cols + 2 * gw < limit && rows * cols < limit;
}

// The tile of one work item: rows [y0, y1) and columns [x0, x1) of an image, `width` pixels per tile row.
// (int: the launcher checks that H and W are below 2^30.)
struct Tile {
  int y0, y1, x0, x1;
  int width;
};

// Tile pixel i, channel lane l lives at acc[i * kLanes + (l ^ (i % 32))]: the lanes adding to one pixel hit
// 32 different banks, and so do the lanes writing 32 consecutive pixels of one channel out.
__device__ inline int acc_index(int pixel, int lane) { return pixel * kLanes + (lane ^ (pixel & (kLanes - 1))); }

// A sample's four neighbours as seen from one tile, packed in one word so that one shuffle hands them to the
// warp: neighbour 0 is pixel (y, x), 1 is (y, x + dx), 2 is (y + dy, x), 3 is (y + dy, x + dx), with dx, dy
// in {0, 1} (0 where the border clamp makes two neighbours one pixel).
//   bits 0-4: a bin slot (see add_avg_hit)     bits 5-9 / 10-14: y - tile.y0 + 1 / x - tile.x0 + 1
//   bit 15: dy   bit 16: dx                    bits 17-20: which neighbours are in the tile (0: none)
struct Neighbours {
  uint32_t word;
  __device__ unsigned in_tile() const { return word >> 17; }
  __device__ unsigned slot() const { return word & 31; }
};

template <typename T>
__device__ Neighbours neighbours_in(const BilinearSample<T>& b, const Tile& tile, int64_t width, bool narrow) {
  const int y = narrow ? int(uint32_t(b.offset[0]) / uint32_t(width)) : int(b.offset[0] / width);
  const int x = int(b.offset[0] - int64_t(y) * width);
  const int dy = b.offset[2] != b.offset[0], dx = int(b.offset[1] - b.offset[0]);
  unsigned in = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int yy = y + (j >> 1) * dy, xx = x + (j & 1) * dx;
    in |= unsigned(b.inside && yy >= tile.y0 && yy < tile.y1 && xx >= tile.x0 && xx < tile.x1) << j;
  }
  if (!in) return {0};
  return {uint32_t((y - tile.y0 + 1) << 5 | (x - tile.x0 + 1) << 10 | dy << 15 | dx << 16 | in << 17)};
}

// acc[neighbour j] += share * weight[j] for the neighbours in the tile, one after the other as on the CPU.
template <typename T>
__device__ void add_to_tile(T* acc, Neighbours n, T share, const T weight[4], int tile_width) {
  const int lane = threadIdx.x, y = int(n.word >> 5 & 31) - 1, x = int(n.word >> 10 & 31) - 1;
  const int dy = n.word >> 15 & 1, dx = n.word >> 16 & 1;
  const unsigned in = n.in_tile();
  int at[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) at[j] = acc_index((y + (j >> 1) * dy) * tile_width + x + (j & 1) * dx, lane);
  if (dy && dx) {  // four different pixels: all four loads in flight at once
    T value[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (in >> j & 1) value[j] = acc[at[j]];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (in >> j & 1) acc[at[j]] = value[j] + unfused_mul(share, weight[j]);
  } else {  // the border: a pixel repeats, and takes its terms in order
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (in >> j & 1) acc[at[j]] += unfused_mul(share, weight[j]);
  }
}

// Every lane's copy of `value` from lane src (a trivially copyable struct, as 32-bit words).
template <typename S>
__device__ S broadcast(const S& value, int src) {
  static_assert(sizeof(S) % 4 == 0, "broadcast moves 32-bit words");
  uint32_t words[sizeof(S) / 4];
  memcpy(words, &value, sizeof(S));
#pragma unroll
  for (int i = 0; i < int(sizeof(S) / 4); ++i) words[i] = __shfl_sync(kAllLanes, words[i], src);
  S out;
  memcpy(&out, words, sizeof(S));
  return out;
}

// One sample's contribution as the warp passes it around: its neighbours and their weights.
template <typename T>
struct Contribution {
  Neighbours neighbours;
  T weight[4];
};

// The shares dy[k, c, bin] / count of up to kStaged consecutive bin slots, for this lane's channel c: loaded
// into registers first (the loads in flight together), divided and stored into the warp's scratch later.
constexpr int kStaged = 16;

template <typename T, typename I>
struct StagedShares {
  T raw[kStaged];
  // Slots first .. first + count - 1 of the hit's bin rectangle (bin_cols columns from bin (p0, q0)).
  __device__ void load(const T* upstream, I first, I count, I bin_cols, int64_t p0, int64_t q0, int64_t pooled_w) {
    I bp = first / bin_cols, bq = first % bin_cols;
#pragma unroll
    for (int u = 0; u < kStaged; ++u) {
      raw[u] = I(u) < count ? upstream[(p0 + int64_t(bp)) * pooled_w + q0 + int64_t(bq)] : T(0);
      if (++bq == bin_cols) bq = 0, ++bp;
    }
  }
  __device__ void store(T* shares, I first_index, I count, T divisor) const {
#pragma unroll
    for (int u = 0; u < kStaged; ++u)
      if (I(u) < count) shares[(first_index + I(u)) * kLanes + threadIdx.x] = raw[u] / divisor;  // the CPU's share
  }
};

// avg mode, one hit: RoI k's samples in `order`, 32 at a time (see the top of the file). `shares` is this
// warp's scratch of kLanes x kLanes values: the shares of the current 32 samples' bins (at most 32 bins,
// consecutive slots dp * bin_cols + dq of the hit's bin rectangle), lane c holding channel c's.
template <typename T, typename I, typename Sampler, typename Roi>
__device__ void add_avg_hit(const HitOrder<I>& order, const Roi& roi, int64_t k, const T* grad_output,
                            const Sampler& sampler, T* acc, T* shares, const Tile& tile, int64_t chunk,
                            const GatherShape& s, bool narrow) {
  const int lane = threadIdx.x;
  const int64_t p0 = order.p0, q0 = order.q0;
  const bool live = chunk * kLanes + lane < s.channels;
  const T divisor = sampler.divisor(roi);
  const T* upstream = grad_output + (k * s.channels + min(chunk * kLanes + lane, s.channels - 1)) * s.bins();
  const I total = order.rows * order.cols;
  for (I base = 0; base < total; base += kLanes) {
    const I t = base + I(lane), last = min(total - 1 - base, I(kLanes - 1));
    I dp = 0, dq = 0, iy = 0, ix = 0;
    if (t < total) order.at(t, &dp, &dq, &iy, &ix);
    const I slot = dp * order.bin_cols + dq;
    const I first_slot = __shfl_sync(kAllLanes, slot, 0);
    const I slots = __shfl_sync(kAllLanes, slot, int(last)) - first_slot + 1;
    StagedShares<T, I> staged;
    staged.load(upstream, first_slot, live ? min(slots, I(kStaged)) : I(0), order.bin_cols, p0, q0, s.pooled_w);

    Contribution<T> mine{{0}, {T(0), T(0), T(0), T(0)}};
    if (t < total) {
      const BilinearSample<T> b = sampler.sample(roi, p0 + dp, q0 + dq, iy, ix);
      mine.neighbours = neighbours_in(b, tile, s.width, narrow);
      mine.neighbours.word |= uint32_t(slot - first_slot);
#pragma unroll
      for (int j = 0; j < 4; ++j) mine.weight[j] = b.weight[j];
    }
    if (live) {
      staged.store(shares, 0, min(slots, I(kStaged)), divisor);
      for (I v = kStaged; v < slots; v += kStaged) {  // bins of one or two samples each: more than 16 slots
        StagedShares<T, I> more;
        more.load(upstream, first_slot + v, min(slots - v, I(kStaged)), order.bin_cols, p0, q0, s.pooled_w);
        more.store(shares, v, min(slots - v, I(kStaged)), divisor);
      }
    }

    // The samples with a neighbour in the tile, in order. The next one's shuffles are issued before this one's
    // additions, so their latency hides behind the shared-memory work.
    unsigned todo = __ballot_sync(kAllLanes, mine.neighbours.in_tile() != 0);
    if (!todo) continue;
    int src = __ffs(todo) - 1;
    todo &= todo - 1;
    Contribution<T> current = broadcast(mine, src);
    while (true) {
      const Contribution<T> next = broadcast(mine, todo ? __ffs(todo) - 1 : src);
      if (live) add_to_tile(acc, current.neighbours, shares[current.neighbours.slot() * kLanes + lane], current.weight,
                            tile.width);
      if (!todo) break;
      todo &= todo - 1;
      current = next;
    }
  }
}

// max mode, one hit: each lane's channel has its own winning sample per bin, which gets all of dy.
template <typename T, typename Sampler, typename Roi>
__device__ void add_max_hit(const SampleRanges& r, const Roi& roi, int64_t k, const T* grad_output,
                            const int64_t* argmax, const Sampler& sampler, T* acc, const Tile& tile, int64_t chunk,
                            const GatherShape& s, bool narrow) {
  const int lane = threadIdx.x;
  if (chunk * kLanes + lane >= s.channels) return;  // nothing below talks across lanes
  const int64_t first = (k * s.channels + chunk * kLanes + lane) * s.bins();  // dy[k, c, 0, 0]
  for (int64_t p = r.row0 / roi.grid_h; p <= (r.row1 - 1) / roi.grid_h; ++p) {
    for (int64_t q = r.col0 / roi.grid_w; q <= (r.col1 - 1) / roi.grid_w; ++q) {
      const int64_t out = first + p * s.pooled_w + q, winner = argmax[out];
      const int64_t iy = winner / roi.grid_w, ix = winner % roi.grid_w;
      const int64_t i = p * roi.grid_h + iy, j = q * roi.grid_w + ix;
      if (i < r.row0 || i >= r.row1 || j < r.col0 || j >= r.col1) continue;  // cannot reach the tile
      const BilinearSample<T> b = sampler.sample(roi, p, q, iy, ix);
      const Neighbours n = neighbours_in(b, tile, s.width, narrow);
      if (n.in_tile()) add_to_tile(acc, n, grad_output[out], b.weight, tile.width);
    }
  }
}

struct Tiling {
  int tile_h, tile_w;
  int64_t tiles_y, tiles_x, chunks;
  int64_t items(int64_t batch) const { return batch * tiles_y * tiles_x * chunks; }
  __host__ __device__ int pixels() const { return tile_h * tile_w; }
};

template <typename T>
size_t shared_bytes(const Tiling& t) {
  return (size_t(t.pixels()) + kLanes) * kLanes * sizeof(T);  // the tile, then the shares' scratch
}

template <typename T, bool kMax, typename Sampler>
__global__ void gather_kernel(int64_t items, const T* grad_output, const int64_t* argmax, Sampler sampler,
                              const int4* spans, T* grad_input, GatherShape s, Tiling tiling) {
  extern __shared__ unsigned char shared_memory[];
  T* acc = reinterpret_cast<T*>(shared_memory);  // one warp per block
  T* shares = acc + tiling.pixels() * kLanes;
  const int lane = threadIdx.x;
  const bool narrow = s.height * s.width <= int64_t(UINT32_MAX);
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t chunk = item % tiling.chunks, tile_index = item / tiling.chunks;
    const int64_t tx = tile_index % tiling.tiles_x, ty = tile_index / tiling.tiles_x % tiling.tiles_y;
    const int64_t batch = tile_index / (tiling.tiles_x * tiling.tiles_y);
    Tile tile;
    tile.y0 = int(ty * tiling.tile_h);
    tile.y1 = int(min(ty * tiling.tile_h + tiling.tile_h, s.height));
    tile.x0 = int(tx * tiling.tile_w);
    tile.x1 = int(min(tx * tiling.tile_w + tiling.tile_w, s.width));
    tile.width = tiling.tile_w;
    const int64_t top = batch * s.height + tile.y0, bottom = batch * s.height + tile.y1;  // in the stacked map
    // Where a sample must lie to reach the tile: a sample reads rows floor(y) and floor(y) + 1, so y in
    // [y0 - 1, y1] (closed: y = H reads row H - 1); in [-1, 0] it reads rows 0 and 1. Same for x.
    const MapBox reach{tile.y0 >= 2 ? double(tile.y0 - 1) : -1.0, double(tile.y1),
                       tile.x0 >= 2 ? double(tile.x0 - 1) : -1.0, double(tile.x1)};
    // Each lane zeroes the entries of its own channel: until the write-out, no lane touches another's.
    for (int i = 0; i < tiling.pixels(); ++i) acc[acc_index(i, lane)] = T(0);

    int4 next_span = lane < s.rois ? spans[lane] : int4{};
    for (int64_t k0 = 0; k0 < s.rois; k0 += kLanes) {
      // Each lane tests one RoI, and finds the samples of a hit that can reach the tile. (The next 32 spans
      // are loaded meanwhile.)
      const int4 span = next_span;
      if (k0 + kLanes + lane < s.rois) next_span = spans[k0 + kLanes + lane];
      SampleRanges mine;
      decltype(sampler.roi(0)) my_roi{};
      if (k0 + lane < s.rois && span.y > top && span.x < bottom && span.w > tile.x0 && span.z < tile.x1) {
        my_roi = sampler.roi(k0 + lane);
        mine = sampler.ranges(my_roi, reach);
      }
      for (unsigned hits = __ballot_sync(kAllLanes, !mine.empty()); hits; hits &= hits - 1) {
        const int src = __ffs(hits) - 1;
        const int64_t k = k0 + src;
        const SampleRanges r = broadcast(mine, src);
        const auto roi = broadcast(my_roi, src);
        if constexpr (kMax) {
          add_max_hit(r, roi, k, grad_output, argmax, sampler, acc, tile, chunk, s, narrow);
        } else {
          if (fits_32(r, roi.grid_h, roi.grid_w))
            add_avg_hit(HitOrder<uint32_t>(r, roi.grid_h, roi.grid_w), roi, k, grad_output, sampler, acc, shares,
                        tile, chunk, s, narrow);
          else
            add_avg_hit(HitOrder<uint64_t>(r, roi.grid_h, roi.grid_w), roi, k, grad_output, sampler, acc, shares,
                        tile, chunk, s, narrow);
        }
      }
    }
    __syncwarp();
    // Write the tile: consecutive lanes take consecutive pixels of one channel (coalesced rows).
    for (int i = lane; i < kLanes * tiling.pixels(); i += kLanes) {
      const int channel = i / tiling.pixels(), pixel = i % tiling.pixels();
      const int64_t y = tile.y0 + pixel / tiling.tile_w, x = tile.x0 + pixel % tiling.tile_w;
      const int64_t c = chunk * kLanes + channel;
      if (y < tile.y1 && x < tile.x1 && c < s.channels)
        grad_input[((batch * s.channels + c) * s.height + y) * s.width + x] = acc[acc_index(pixel, channel)];
    }
    __syncwarp();  // the next item zeroes acc
  }
}

// Enough work items for this many warps per multiprocessor, before tiles shrink below the largest size.
constexpr int64_t kItemsPerMultiprocessor = 8;

// The largest tile that fits kMaxSharedBytes with the scratch (16 x 16 in float32, 8 x 16 in float64), halved
// (rows first) while the work items would not fill the GPU.
template <typename T>
Tiling choose_tiling(const GatherShape& s) {
  constexpr size_t kMaxSharedBytes = 48 * 1024;  // the default limit of one block's dynamic shared memory
  Tiling t{16, 16, 0, 0, (s.channels + kLanes - 1) / kLanes};
  const auto fit = [&] {
    t.tiles_y = (s.height + t.tile_h - 1) / t.tile_h;
    t.tiles_x = (s.width + t.tile_w - 1) / t.tile_w;
  };
  while (shared_bytes<T>(t) > kMaxSharedBytes) t.tile_h /= 2;
  fit();
  const int64_t wanted = cuda::multiprocessor_count() * kItemsPerMultiprocessor;
  while (t.items(s.batch) < wanted && t.pixels() > 1) {
    if (t.tile_h >= t.tile_w) t.tile_h /= 2;
    else t.tile_w /= 2;
    fit();
  }
  return t;
}

// ---- the launcher: call it inside MINIDET_DISPATCH_FLOATING with T = scalar_t ------------------------------

// grad_input (N, C, H, W) is written whole from grad_output (K, C, ph, pw) (and argmax like it when kMax);
// all contiguous.
template <typename T, bool kMax, typename Sampler>
void backward(const Tensor& grad_output, const Sampler& sampler, const Tensor& argmax, const Tensor& grad_input,
              const char* op) {
  if (grad_input.numel() == 0) return;
  const GatherShape s{grad_input.size(0), grad_output.size(0), grad_input.size(1), grad_input.size(2),
                      grad_input.size(3), grad_output.size(2), grad_output.size(3)};
  if (s.rois == 0) {
    grad_input.zero_();
    return;
  }
  // The stacked map's rows and every column are int32 in span_kernel.
  MINIDET_CHECK(s.batch * s.height < (int64_t(1) << 30) && s.width < (int64_t(1) << 30), op,
                ": deterministic backward needs N*H and W below 2^30, got N*H = ", s.batch * s.height,
                ", W = ", s.width);
  const cudaStream_t stream = cuda::current_stream();
  // 16 bytes (an int4) per RoI; a fresh allocation is aligned far beyond the 16 bytes an int4 needs.
  Tensor spans = empty({s.rois, 2}, TensorOptions(kInt64, grad_input.device()));
  int4* span_data = reinterpret_cast<int4*>(spans.data<int64_t>());
  span_kernel<T, Sampler><<<cuda::blocks_for(s.rois), cuda::kThreadsPerBlock, 0, stream>>>(sampler, span_data, s);
  MINIDET_CUDA_LAUNCH_CHECK("roi_gather span_kernel");
  const Tiling tiling = choose_tiling<T>(s);
  const int64_t items = tiling.items(s.batch);
  gather_kernel<T, kMax, Sampler><<<cuda::blocks_for(items, 1), kLanes, shared_bytes<T>(tiling), stream>>>(
      items, grad_output.data<T>(), kMax ? argmax.data<int64_t>() : nullptr, sampler, span_data,
      grad_input.data<T>(), s, tiling);
  MINIDET_CUDA_LAUNCH_CHECK("roi_gather gather_kernel");
}

}  // namespace minidet::ops::detail::roi_gather
