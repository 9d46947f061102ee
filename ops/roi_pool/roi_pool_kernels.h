// RoIPool's bin arithmetic, shared by the CPU and CUDA kernels (and the walkthrough) so that both devices
// cut exactly the same bins, and the kernel entry points. Tensors passed to kernels are contiguous.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"

namespace minidet::ops::detail {

struct RoIPoolGeometry {
  int64_t num_rois = 0, channels = 0, height = 0, width = 0;
  int64_t pooled_height = 1, pooled_width = 1;
  double spatial_scale = 1.0;
};

// A bin's pixels: rows [y0, y1) and columns [x0, x1) of the plane, already clipped. Empty when y1 <= y0 or
// x1 <= x0.
struct RoIPoolBin {
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
  MINIDET_HOST_DEVICE bool empty() const { return y1 <= y0 || x1 <= x0; }
};

// An already floored/ceiled edge clipped to [0, limit] before it becomes an integer, so a huge coordinate
// never overflows the cast. Written "not > 0" so a NaN edge (inf - inf after an overflowing scale) maps
// to 0 and yields an empty bin rather than undefined behaviour.
template <typename T>
MINIDET_HOST_DEVICE inline int64_t clip_edge(T edge, int64_t limit) {
  if (!(edge > T(0))) return 0;
  if (edge >= T(limit)) return limit;
  return static_cast<int64_t>(edge);
}

// One RoI's bin edges, following roi_pool.h. A bin's rows are [row_start(p), row_end(p)) and its columns
// [col_start(q), col_end(q)), each edge clipped to the map. The edge Y1 + p*bin_h is computed with an
// explicit fused multiply-add: the CUDA compiler fuses a*b + c on its own while the host compiler may not,
// and a one-ulp difference right at an integer would move a bin edge by a whole pixel on one device only.
// std::fma rounds once on both, so CPU and CUDA cut identical bins. Every edge is nondecreasing in p (or q),
// which the CUDA forward over tiles relies on to find the bins that meet a tile as a range of p and of q.
template <typename T>
struct RoIPoolFrame {
  T x1, y1, bin_width, bin_height;
  int64_t height, width;
  bool empty;  // inverted or degenerate RoI: every bin is empty
  MINIDET_HOST_DEVICE int64_t row_start(int64_t p) const {
    return clip_edge(std::floor(std::fma(static_cast<T>(p), bin_height, y1)), height);
  }
  MINIDET_HOST_DEVICE int64_t row_end(int64_t p) const {
    return clip_edge(std::ceil(std::fma(static_cast<T>(p + 1), bin_height, y1)), height);
  }
  MINIDET_HOST_DEVICE int64_t col_start(int64_t q) const {
    return clip_edge(std::floor(std::fma(static_cast<T>(q), bin_width, x1)), width);
  }
  MINIDET_HOST_DEVICE int64_t col_end(int64_t q) const {
    return clip_edge(std::ceil(std::fma(static_cast<T>(q + 1), bin_width, x1)), width);
  }
};

// The frame of one RoI row (batch, x1, y1, x2, y2).
template <typename T>
MINIDET_HOST_DEVICE inline RoIPoolFrame<T> roi_pool_frame(const T* roi, const RoIPoolGeometry& g) {
  const T scale = static_cast<T>(g.spatial_scale);
  const T x1 = roi[1] * scale, y1 = roi[2] * scale;
  const T x2 = (roi[3] + T(1)) * scale, y2 = (roi[4] + T(1)) * scale;
  const T roi_width = x2 - x1, roi_height = y2 - y1;
  RoIPoolFrame<T> f{x1, y1, roi_width / static_cast<T>(g.pooled_width), roi_height / static_cast<T>(g.pooled_height),
                    g.height, g.width, !(roi_width > T(0)) || !(roi_height > T(0))};
  return f;
}

// Bin (p, q) of one RoI row (batch, x1, y1, x2, y2).
template <typename T>
MINIDET_HOST_DEVICE inline RoIPoolBin roi_pool_bin(const RoIPoolFrame<T>& f, int64_t p, int64_t q) {
  RoIPoolBin bin;
  if (f.empty) return bin;
  bin.y0 = f.row_start(p);
  bin.y1 = f.row_end(p);
  bin.x0 = f.col_start(q);
  bin.x1 = f.col_end(q);
  return bin;
}
template <typename T>
MINIDET_HOST_DEVICE inline RoIPoolBin roi_pool_bin(const T* roi, const RoIPoolGeometry& g, int64_t p, int64_t q) {
  return roi_pool_bin(roi_pool_frame(roi, g), p, q);
}

// The tie and NaN rule of roi_pool.h as one test: does v replace the running maximum `best`? Only a strictly
// greater value, or the first NaN. `v != v` is the NaN test that reads the same on host and device.
template <typename T>
MINIDET_HOST_DEVICE inline bool roi_pool_replaces(T v, T best) {
  return v > best || (v != v && best == best);
}

// The maximum of one bin of a plane and its flat index (roi_pool.h's tie and NaN rules): start from the
// bin's first pixel and replace only on a strictly greater value, or on the first NaN. An empty bin gives
// (0, -1). Index is the type of the in-plane arithmetic: the CUDA forward uses 32 bits when the whole input
// fits (64-bit integer division and multiplication are emulated in several instructions on the GPU).
template <typename T, typename Index = int64_t>
MINIDET_HOST_DEVICE inline void roi_pool_bin_max(const T* plane, Index width, const RoIPoolBin& bin, T* value,
                                                 int64_t* index) {
  if (bin.empty()) {
    *value = T(0);
    *index = -1;
    return;
  }
  const Index y0 = Index(bin.y0), y1 = Index(bin.y1), x0 = Index(bin.x0), x1 = Index(bin.x1);
  Index best_index = y0 * width + x0;
  T best = plane[best_index];
  for (Index y = y0; y < y1; ++y)
    for (Index x = x0, i = y * width + x0; x < x1; ++x, ++i) {
      const T v = plane[i];
      if (roi_pool_replaces(v, best)) {
        best = v;
        best_index = i;
      }
    }
  *value = best;
  *index = best_index;
}

void roi_pool_forward_cpu(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                          const RoIPoolGeometry& g);
// grad_input is written whole (not accumulated into) by both devices.
void roi_pool_backward_cpu(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                           const Tensor& grad_input, const RoIPoolGeometry& g);
#if MINIDET_WITH_CUDA
void roi_pool_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                           const RoIPoolGeometry& g);
void roi_pool_backward_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                            const Tensor& grad_input, const RoIPoolGeometry& g, bool deterministic);
void roi_pool_backward_deterministic_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                                          const Tensor& grad_input, const RoIPoolGeometry& g);
// The forward over tiles of a channel-last map (roi_pool_tiles_cuda.cu), and whether it takes this input.
bool roi_pool_tiles_take(const Tensor& input, const RoIPoolGeometry& g);
void roi_pool_forward_tiles_cuda(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                                 const RoIPoolGeometry& g);
#endif

}  // namespace minidet::ops::detail
