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

// Bin (p, q) of one RoI row (batch, x1, y1, x2, y2), following roi_pool.h. The edge Y1 + p*bin_h is
// computed with an explicit fused multiply-add: the CUDA compiler fuses a*b + c on its own while the host
// compiler may not, and a one-ulp difference right at an integer would move a bin edge by a whole pixel on
// one device only. std::fma rounds once on both, so CPU and CUDA cut identical bins.
template <typename T>
MINIDET_HOST_DEVICE inline RoIPoolBin roi_pool_bin(const T* roi, const RoIPoolGeometry& g, int64_t p, int64_t q) {
  const T scale = static_cast<T>(g.spatial_scale);
  const T x1 = roi[1] * scale, y1 = roi[2] * scale;
  const T x2 = (roi[3] + T(1)) * scale, y2 = (roi[4] + T(1)) * scale;
  const T roi_width = x2 - x1, roi_height = y2 - y1;
  RoIPoolBin bin;
  if (!(roi_width > T(0)) || !(roi_height > T(0))) return bin;  // inverted or degenerate: every bin empty
  const T bin_width = roi_width / static_cast<T>(g.pooled_width);
  const T bin_height = roi_height / static_cast<T>(g.pooled_height);
  bin.y0 = clip_edge(std::floor(std::fma(static_cast<T>(p), bin_height, y1)), g.height);
  bin.y1 = clip_edge(std::ceil(std::fma(static_cast<T>(p + 1), bin_height, y1)), g.height);
  bin.x0 = clip_edge(std::floor(std::fma(static_cast<T>(q), bin_width, x1)), g.width);
  bin.x1 = clip_edge(std::ceil(std::fma(static_cast<T>(q + 1), bin_width, x1)), g.width);
  return bin;
}

// The maximum of one bin of a plane and its flat index (roi_pool.h's tie and NaN rules): start from the
// bin's first pixel and replace only on a strictly greater value, or on the first NaN. An empty bin gives
// (0, -1). `v != v` is the NaN test that reads the same on host and device.
template <typename T>
MINIDET_HOST_DEVICE inline void roi_pool_bin_max(const T* plane, int64_t width, const RoIPoolBin& bin, T* value,
                                                 int64_t* index) {
  if (bin.empty()) {
    *value = T(0);
    *index = -1;
    return;
  }
  T best = plane[bin.y0 * width + bin.x0];
  int64_t best_index = bin.y0 * width + bin.x0;
  for (int64_t y = bin.y0; y < bin.y1; ++y)
    for (int64_t x = bin.x0; x < bin.x1; ++x) {
      const T v = plane[y * width + x];
      if (v > best || (v != v && best == best)) {
        best = v;
        best_index = y * width + x;
      }
    }
  *value = best;
  *index = best_index;
}

void roi_pool_forward_cpu(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                          const RoIPoolGeometry& g);
// grad_input must be zero-filled: the kernels add into it.
void roi_pool_backward_cpu(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                           const Tensor& grad_input, const RoIPoolGeometry& g);
#if MINIDET_WITH_CUDA
void roi_pool_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                           const RoIPoolGeometry& g);
void roi_pool_backward_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                            const Tensor& grad_input, const RoIPoolGeometry& g, bool deterministic);
#endif

}  // namespace minidet::ops::detail
