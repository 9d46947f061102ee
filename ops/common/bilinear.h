// Bilinear sampling of one feature plane at a continuous point, shared by the RoI ops (roi_align,
// roi_align_rotated) on CPU and CUDA. Header-only; every function is MINIDET_HOST_DEVICE.
//
// Pixel (r, c) of an H x W plane sits at the continuous point (y, x) = (r, c). A sample at (y, x) reads
//
//   value = w[0] * f(y0, x0) + w[1] * f(y0, x1) + w[2] * f(y1, x0) + w[3] * f(y1, x1)
//   with y0 = floor(y), y1 = y0 + 1, ly = y - y0, hy = 1 - ly (same for x), and
//   w[0] = hy*hx,  w[1] = hy*lx,  w[2] = ly*hx,  w[3] = ly*lx        (the weights sum to 1)
//
// The border rules (the mmcv / torchvision convention, which RoIAlign's published numbers depend on):
//   - a point outside [-1, H] x [-1, W] (inclusive) contributes 0: all four weights are 0;
//   - inside that band, y in [-1, 0] is clamped to 0 and y >= H-1 is clamped to H-1, where the two rows
//     y0 and y1 coincide (same for x). So a point just outside the map reads the border pixel at full weight.
//   - a non-finite y or x (NaN, +-Inf) is "outside": zero weights and valid indices, never a NaN.
//
// Derivatives (for the gradient with respect to the sample position, i.e. the RoI coordinates):
//   on an unclamped axis  d ly/dy = 1, so  dw/dy = (-hx, -lx, +hx, +lx)  and  dw/dx = (-hy, +hy, -ly, +ly);
//   on a clamped axis the position does not move the weights, so that axis' derivatives are 0, and outside
//   the band everything is 0. The weights are continuous in (y, x) except at the band edge y = -1 / y = H
//   (a jump from the border pixel's value to 0); their derivative jumps at every integer y and at the clamp
//   boundaries. Callers that gradcheck must keep samples away from those lines.
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace minidet::ops {

template <typename T>
struct BilinearSample {
  // Offsets into one plane (row * W + col) of the four neighbours, in the order
  // (y0, x0), (y0, x1), (y1, x0), (y1, x1). Always inside [0, H*W) when H, W >= 1, even when unused.
  int64_t offset[4];
  T weight[4];
  T dweight_dy[4];  // d weight[k] / d y
  T dweight_dx[4];  // d weight[k] / d x
  bool inside;      // false: the point contributes nothing (all weights and derivatives are 0)
};

// Samples an H x W plane at (y, x) following the rules above.
template <typename T>
MINIDET_HOST_DEVICE inline BilinearSample<T> bilinear_sample(T y, T x, int64_t height, int64_t width) {
  BilinearSample<T> s;
  for (int k = 0; k < 4; ++k) {
    s.offset[k] = 0;
    s.weight[k] = T(0);
    s.dweight_dy[k] = T(0);
    s.dweight_dx[k] = T(0);
  }
  // Written as "not inside" so that NaN (every comparison false) lands here too.
  const bool in_band = y >= T(-1) && y <= T(height) && x >= T(-1) && x <= T(width);
  s.inside = in_band && height >= 1 && width >= 1;
  if (!s.inside) return s;

  // Clamp each axis; remember whether the clamp froze it (its derivative is then 0).
  bool y_moves = true, x_moves = true;
  if (y <= T(0)) {
    y = T(0);
    y_moves = false;
  }
  if (x <= T(0)) {
    x = T(0);
    x_moves = false;
  }
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x);  // floor, since y, x >= 0 here
  int64_t y1, x1;
  if (y0 >= height - 1) {  // on or past the last row: both rows are the last one
    y0 = y1 = height - 1;
    y = T(y0);
    y_moves = false;
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= width - 1) {
    x0 = x1 = width - 1;
    x = T(x0);
    x_moves = false;
  } else {
    x1 = x0 + 1;
  }

  const T ly = y - T(y0), lx = x - T(x0);
  const T hy = T(1) - ly, hx = T(1) - lx;
  s.offset[0] = y0 * width + x0;
  s.offset[1] = y0 * width + x1;
  s.offset[2] = y1 * width + x0;
  s.offset[3] = y1 * width + x1;
  s.weight[0] = hy * hx;
  s.weight[1] = hy * lx;
  s.weight[2] = ly * hx;
  s.weight[3] = ly * lx;
  if (y_moves) {
    s.dweight_dy[0] = -hx;
    s.dweight_dy[1] = -lx;
    s.dweight_dy[2] = hx;
    s.dweight_dy[3] = lx;
  }
  if (x_moves) {
    s.dweight_dx[0] = -hy;
    s.dweight_dx[1] = hy;
    s.dweight_dx[2] = -ly;
    s.dweight_dx[3] = ly;
  }
  return s;
}

// sum_k weight[k] * plane[offset[k] * stride]: the interpolated value (0 when the point is outside). stride is
// the distance between neighbouring pixels: 1 in a plane, C in a channel-last (H, W, C) map.
template <typename T>
MINIDET_HOST_DEVICE inline T bilinear_interpolate(const BilinearSample<T>& s, const T* plane, int64_t stride = 1) {
  if (!s.inside) return T(0);
  return s.weight[0] * plane[s.offset[0] * stride] + s.weight[1] * plane[s.offset[1] * stride] +
         s.weight[2] * plane[s.offset[2] * stride] + s.weight[3] * plane[s.offset[3] * stride];
}

}  // namespace minidet::ops
