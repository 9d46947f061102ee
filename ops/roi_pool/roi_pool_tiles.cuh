// The walk of RoIPool's forward over tiles (roi_pool_tiles_cuda.cu): a warp that works on one tile of the map
// (rows [y0, y1) and columns [x0, x1) of one image) walks the RoIs 32 at a time and visits, for each RoI that
// meets the tile, the range of its bins that do.
//
// The RoIs' outer extents are computed once (span_kernel) in a map where the N images are stacked vertically:
// image b's rows are b*H .. b*H + H - 1, so one comparison tests both the image and the rows.
#pragma once

#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/roi_pool/roi_pool_kernels.h"
#include "ops/roi_pool/roi_pool_plane.cuh"  // names_an_image

namespace minidet::ops::detail::roi_tiles {

// Rows [y0, y1) (in the stacked map) and columns [x0, x1) that RoI k's bins can reach: the union of its bins.
// An inverted or degenerate RoI gets an empty span, so it meets no tile, and so does a row whose batch index
// names no image (possible only with the value check off): its bins stay empty, as in the plane kernels.
template <typename T>
__global__ void span_kernel(const T* rois, int4* spans, RoIPoolGeometry g, int64_t images) {
  MINIDET_KERNEL_LOOP(k, g.num_rois) {
    const T* roi = rois + k * 5;
    const RoIPoolFrame<T> f = roi_pool_frame(roi, g);
    const bool named = roi_plane::names_an_image(roi[0], images);
    const int top = named ? static_cast<int>(static_cast<int64_t>(roi[0]) * g.height) : 0;
    spans[k] = f.empty || !named ? make_int4(0, 0, 0, 0)
                                 : make_int4(top + int(f.row_start(0)), top + int(f.row_end(g.pooled_height - 1)),
                                             int(f.col_start(0)), int(f.col_end(g.pooled_width - 1)));
  }
}

// Every RoI's span, as one int4 (row start, row end, column start, column end) per RoI, in raw storage: a
// fresh allocation is aligned far beyond the 16 bytes an int4 needs. The stacked map's rows and every column
// must fit an int.
template <typename T>
Tensor spans(const Tensor& rois, const RoIPoolGeometry& g, int64_t images) {
  MINIDET_CHECK(images * g.height < (int64_t(1) << 31) && g.width < (int64_t(1) << 31),
                "roi_pool: the tile kernels need N*H and W below 2^31, got N*H = ", images * g.height,
                ", W = ", g.width);
  Tensor spans = empty({g.num_rois, 2}, TensorOptions(kInt64, rois.device()));
  span_kernel<T><<<cuda::blocks_for(g.num_rois), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
      rois.data<T>(), reinterpret_cast<int4*>(spans.data<int64_t>()), g, images);
  MINIDET_CUDA_LAUNCH_CHECK("roi_pool span_kernel");
  return spans;
}

// The bins i in [first, last) whose extent [start(i), end(i)) meets [lo, hi). Both edges are nondecreasing
// in i, so those bins form one range. `guess` (any float, NaN included) is only where the walk starts: the
// walk is exact from anywhere, and a guess from the bin size keeps it to a step or two.
template <typename Start, typename End>
__device__ int2 bins_meeting(Start start, End end, int64_t lo, int64_t hi, int pooled, float guess) {
  int first = static_cast<int>(fminf(fmaxf(guess, 0.0f), float(pooled - 1)));
  while (first > 0 && end(first - 1) > lo) --first;
  while (first < pooled && end(first) <= lo) ++first;
  int last = first;
  while (last < pooled && start(last) < hi) ++last;
  return make_int2(first, last);
}

// One tile: rows [y0, y1) of image `image`, columns [x0, x1).
struct Tile {
  int64_t image, y0, y1, x0, x1;
};

// What a lane knows of its RoI of a round (RoIs [k0, k0 + 32), one per lane): its span and its row.
template <typename T>
struct Probe {
  int4 span;
  T roi[5];
};

template <typename T>
__device__ Probe<T> probe(const T* rois, const int4* spans, const RoIPoolGeometry& g, int64_t k0) {
  Probe<T> probe{make_int4(0, 0, 0, 0), {}};
  const int64_t mine = k0 + threadIdx.x % 32;
  if (mine < g.num_rois) {
    probe.span = spans[mine];
    for (int i = 0; i < 5; ++i) probe.roi[i] = rois[mine * 5 + i];
  }
  return probe;
}

// Whether a RoI's span (span_kernel) meets the tile: rows of the stacked map, so the image is tested too.
__device__ inline bool span_meets(const int4& s, const RoIPoolGeometry& g, const Tile& tile) {
  const int64_t top = tile.image * g.height + tile.y0, bottom = tile.image * g.height + tile.y1;
  return s.y > top && s.x < bottom && s.w > tile.x0 && s.z < tile.x1;
}

// For each RoI of the round that meets the tile, in k order, visit(k, frame, p0, p1, q0, q1) on every lane of
// the warp, with bins [p0, p1) x [q0, q1) the ones meeting the tile and the RoI's frame (roi_pool_kernels.h)
// handed over by shuffles. The lanes test their RoIs and find their bin ranges in parallel; a ballot then
// hands the hits out in order.
template <typename T, typename Visit>
__device__ void visit_round(const Probe<T>& probe, const RoIPoolGeometry& g, int64_t k0, const Tile& tile,
                            Visit& visit) {
  const RoIPoolFrame<T> f = roi_pool_frame(probe.roi, g);
  int2 rows = make_int2(0, 0), cols = make_int2(0, 0);
  if (span_meets(probe.span, g, tile)) {
    rows = bins_meeting([&](int p) { return f.row_start(p); }, [&](int p) { return f.row_end(p); }, tile.y0, tile.y1,
                        int(g.pooled_height), float((T(tile.y0) - f.y1) / f.bin_height));
    cols = bins_meeting([&](int q) { return f.col_start(q); }, [&](int q) { return f.col_end(q); }, tile.x0, tile.x1,
                        int(g.pooled_width), float((T(tile.x0) - f.x1) / f.bin_width));
  }
  unsigned hits = __ballot_sync(0xffffffffu, rows.x < rows.y && cols.x < cols.y);
  while (hits) {
    const int src = __ffs(hits) - 1;
    hits &= hits - 1;
    const int p0 = __shfl_sync(0xffffffffu, rows.x, src), p1 = __shfl_sync(0xffffffffu, rows.y, src);
    const int q0 = __shfl_sync(0xffffffffu, cols.x, src), q1 = __shfl_sync(0xffffffffu, cols.y, src);
    RoIPoolFrame<T> frame = f;
    frame.x1 = __shfl_sync(0xffffffffu, f.x1, src);
    frame.y1 = __shfl_sync(0xffffffffu, f.y1, src);
    frame.bin_width = __shfl_sync(0xffffffffu, f.bin_width, src);
    frame.bin_height = __shfl_sync(0xffffffffu, f.bin_height, src);
    frame.empty = false;  // a RoI with an empty frame has an empty span
    visit(k0 + src, frame, p0, p1, q0, q1);
  }
}

// Walks the rounds of 32 RoIs from `round` on, next(round) giving the round after it (each warp of a block
// can take its own share), and visits every RoI that meets the tile as visit_round does. The next round's
// spans and rows are loaded before the current round's hits are visited, so their latency hides behind that
// work instead of stalling the walk once per round.
template <typename T, typename Next, typename Visit>
__device__ void walk_rois_meeting(const T* rois, const int4* spans, const RoIPoolGeometry& g, int64_t round,
                                  const Tile& tile, Next&& next, Visit&& visit) {
  const int64_t rounds = (g.num_rois + 31) / 32;
  Probe<T> current = probe(rois, spans, g, round * 32);
  while (round < rounds) {
    const int64_t following = next(round);
    const Probe<T> ahead = probe(rois, spans, g, following * 32);
    visit_round(current, g, round * 32, tile, visit);
    current = ahead;
    round = following;
  }
}

// Whether any of RoIs [k0, k0 + 32), one per lane, meets the tile.
__device__ inline bool any_roi_meets(const int4* spans, const RoIPoolGeometry& g, int64_t k0, const Tile& tile) {
  const int64_t mine = k0 + threadIdx.x % 32;
  return __any_sync(0xffffffffu, mine < g.num_rois && span_meets(spans[mine], g, tile));
}

}  // namespace minidet::ops::detail::roi_tiles
