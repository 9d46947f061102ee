// The axis-aligned RoIAlign average in separable form, for the CUDA fast path (roi_align_separable.cuh).
// Header-only, MINIDET_HOST_DEVICE, so the test checks the same functions on the CPU.
//
// A bilinear read (ops/common/bilinear.h) is a product of two one-axis reads: its weights are
// hy*hx, hy*lx, ly*hx, ly*lx, its rows y0, y1 and columns x0, x1 are chosen by y and x alone, and "inside"
// is inside_y and inside_x. On an axis-aligned box a sample's y depends only on its bin row p and sample
// row iy, its x only on (q, ix). So the gradient that RoI k sends to channel c of its image,
//
//   dX[y, x] = sum_{p, q} dY[p, q] / count * sum_{iy, ix} w_y(p, iy; y) * w_x(q, ix; x),
//
// factors as dX = A · (dY / count) · Bᵀ, with
//
//   A[y, p] = sum_iy w_y(p, iy; y)     (rows x pooled_h: the taps of bin row p's sample rows on map row y)
//   B[x, q] = sum_ix w_x(q, ix; x)     (columns x pooled_w)
//
// where w_y(p, iy; y) is the sample row's weight on map row y: hy on y0, ly on y1, 0 elsewhere and when the
// sample row is outside [-1, H]. The forward is the transpose of the same linear map: Y = Aᵀ · X · B / count.
// A and B are the same for all C channels, so a kernel builds them once per RoI; then each channel reads
// (forward) or adds into (backward) each pixel that has a tap in both directions once, with a few
// multiply-adds over the bins, instead of four neighbours for each of the bins * grid_h * grid_w samples.
// The sums come in another order than the per-sample form's, so the last bits differ (as between any two
// runs of the atomic backward).
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "ops/roi_align/roi_align_kernels.h"  // RoiBox, sample_fraction, unfused_mul

namespace minidet::ops::detail {

// One axis of a bilinear read at coordinate y on an axis of `size` pixels: the two taps i0, i1 and their
// weights, by bilinear_sample's rules (outside [-1, size]: no taps; clamped at 0 and at size - 1).
template <typename T>
struct AxisTaps {
  int64_t i0 = 0, i1 = 0;
  T w0 = T(0), w1 = T(0);
  bool inside = false;
};

template <typename T>
MINIDET_HOST_DEVICE inline AxisTaps<T> axis_taps(T y, int64_t size) {
  AxisTaps<T> a;
  if (!(y >= T(-1) && y <= T(size)) || size < 1) return a;  // written so that NaN is outside too
  a.inside = true;
  if (y <= T(0)) y = T(0);
  a.i0 = static_cast<int64_t>(y);
  if (a.i0 >= size - 1) {
    a.i0 = a.i1 = size - 1;
    y = T(a.i0);
  } else {
    a.i1 = a.i0 + 1;
  }
  a.w1 = y - T(a.i0);
  a.w0 = T(1) - a.w1;
  return a;
}

// Calls visit(pixel, weight) for both taps of each sample of bin `bin` (of `pooled`, `grid` samples each)
// along one axis of a RoI that starts at `start` and spans `length` pixels (as roi_sample_at places the
// samples), on an axis of `size` pixels. Summing the visits per pixel gives column `bin` of A (or B) above.
template <typename T, typename Visit>
MINIDET_HOST_DEVICE inline void for_each_bin_tap(T start, T length, int64_t grid, int64_t pooled, int64_t bin,
                                                 int64_t size, Visit&& visit) {
  for (int64_t i = 0; i < grid; ++i) {
    const AxisTaps<T> a = axis_taps(start + unfused_mul(sample_fraction<T>(bin, i, grid, pooled), length), size);
    if (!a.inside) continue;
    visit(a.i0, a.w0);
    visit(a.i1, a.w1);
  }
}

// The same for every bin: visit(bin, pixel, weight).
template <typename T, typename Visit>
MINIDET_HOST_DEVICE inline void for_each_axis_tap(T start, T length, int64_t grid, int64_t pooled, int64_t size,
                                                  Visit&& visit) {
  for (int64_t bin = 0; bin < pooled; ++bin)
    for_each_bin_tap(start, length, grid, pooled, bin, size, [&](int64_t pixel, T w) { visit(bin, pixel, w); });
}

}  // namespace minidet::ops::detail
