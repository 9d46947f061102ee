// Geometry shared by the CPU and CUDA RoIAlign kernels (the formulas of roi_align.h), and the launchers.
//
// Everything about WHERE a sample sits depends on the RoI and the bin only, never on the channel. The
// kernels compute it once per (RoI, bin, sample) and reuse it for every channel: the CPU stores it per RoI,
// the CUDA kernels let the lanes of a warp (consecutive channels of one bin) compute it in lockstep.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/common/bilinear.h"
#include "ops/roi_align/roi_align.h"

namespace minidet::ops::detail {

struct RoiAlignGeometry {
  int64_t batch, channels, height, width;  // of the input
  int64_t rois;                            // K
  int64_t pooled_h, pooled_w;
  double spatial_scale;
  int64_t sampling_ratio;  // <= 0: adaptive
  bool aligned;
  bool max_mode;
  MINIDET_HOST_DEVICE int64_t bins() const { return pooled_h * pooled_w; }
};

// The geometry of input (N, C, H, W) and rois (K, 5) under `options`, unchecked (roi_align.cpp checks first).
RoiAlignGeometry roi_align_geometry(const Tensor& input, const Tensor& rois, const RoIAlignOptions& options);

// A product that is never fused with a following addition. nvcc fuses a*b + c into one FMA by default, the
// host compiler (no -march) does not; in the sample positions that would move a sample by one ulp between
// CPU and GPU, and a sample that sits that close to a pixel line would switch neighbours and change the box
// gradient's dv/dy. With the products pinned, CPU and GPU place every sample at the same bits.
MINIDET_HOST_DEVICE inline float unfused_mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
MINIDET_HOST_DEVICE inline double unfused_mul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// One RoI in feature pixels (roi_align.h): where the box starts, how large it is, how many samples a bin
// has along each axis, and how the size moves with the box's far corner (0 where the legacy clamp holds).
template <typename T>
struct RoiBox {
  int64_t batch;
  T start_y, start_x, roi_h, roi_w;
  bool h_moves, w_moves;  // false when aligned = false clamped the size to 1
  int64_t grid_h, grid_w;
  MINIDET_HOST_DEVICE int64_t count() const { return grid_h * grid_w; }
};

// Adaptive sampling: ceil(|size| / pooled), at least 1 so a zero-size box still samples its centre. The
// upper clamp only keeps the integer cast defined for absurd boxes (1e30 pixels); no real box reaches it.
// roi_align_rotated uses the same function.
template <typename T>
MINIDET_HOST_DEVICE inline int64_t adaptive_grid(T size, int64_t pooled) {
  const T cells = std::ceil(std::fabs(size) / static_cast<T>(pooled));
  if (!(cells >= T(1))) return 1;
  return cells < T(1 << 30) ? static_cast<int64_t>(cells) : int64_t(1) << 30;
}

template <typename T>
MINIDET_HOST_DEVICE inline RoiBox<T> roi_box(const T* roi, const RoiAlignGeometry& g) {
  RoiBox<T> b;
  const T scale = T(g.spatial_scale), offset = g.aligned ? T(0.5) : T(0);
  b.batch = static_cast<int64_t>(roi[0]);
  b.start_x = unfused_mul(roi[1], scale) - offset;
  b.start_y = unfused_mul(roi[2], scale) - offset;
  b.roi_w = (roi[3] - roi[1]) * scale;
  b.roi_h = (roi[4] - roi[2]) * scale;
  b.w_moves = b.h_moves = true;
  if (!g.aligned) {  // legacy: at least one feature pixel; the clamped size no longer follows the box
    if (b.roi_w < T(1)) {
      b.roi_w = T(1);
      b.w_moves = false;
    }
    if (b.roi_h < T(1)) {
      b.roi_h = T(1);
      b.h_moves = false;
    }
  }
  b.grid_h = g.sampling_ratio > 0 ? g.sampling_ratio : adaptive_grid(b.roi_h, g.pooled_h);
  b.grid_w = g.sampling_ratio > 0 ? g.sampling_ratio : adaptive_grid(b.roi_w, g.pooled_w);
  return b;
}

// Fractional position a in [0, 1] of sample i (of `grid`) in bin `bin` (of `pooled`) along one axis:
// (bin + (i + 0.5) / grid) / pooled, written with one division (the integer product is exact).
template <typename T>
MINIDET_HOST_DEVICE inline T sample_fraction(int64_t bin, int64_t i, int64_t grid, int64_t pooled) {
  return (T(bin * grid + i) + T(0.5)) / T(pooled * grid);
}

// Sample (iy, ix) of bin (p, q): its bilinear neighbours and weights, and the fractions a_y, a_x that the
// box gradient needs. roi_sample numbers the samples row-major in the bin, s = iy * grid_w + ix.
template <typename T>
struct RoiSample {
  BilinearSample<T> bilinear;
  T a_y, a_x;
};

template <typename T>
MINIDET_HOST_DEVICE inline RoiSample<T> roi_sample_at(const RoiBox<T>& b, int64_t p, int64_t q, int64_t iy,
                                                      int64_t ix, const RoiAlignGeometry& g) {
  RoiSample<T> r;
  r.a_y = sample_fraction<T>(p, iy, b.grid_h, g.pooled_h);
  r.a_x = sample_fraction<T>(q, ix, b.grid_w, g.pooled_w);
  r.bilinear = bilinear_sample<T>(b.start_y + unfused_mul(r.a_y, b.roi_h), b.start_x + unfused_mul(r.a_x, b.roi_w),
                                  g.height, g.width);
  return r;
}

template <typename T>
MINIDET_HOST_DEVICE inline RoiSample<T> roi_sample(const RoiBox<T>& b, int64_t p, int64_t q, int64_t s,
                                                   const RoiAlignGeometry& g) {
  return roi_sample_at(b, p, q, s / b.grid_w, s % b.grid_w, g);
}

// The max-mode comparison, identical on CPU and CUDA: strictly greater wins (the first of equal samples
// stays), and a NaN wins over any number (then stays, since nothing compares greater than NaN).
template <typename T>
MINIDET_HOST_DEVICE inline bool max_sample_wins(T value, T best) {
  return value > best || (value != value && best == best);
}

// d L / d (x1, y1, x2, y2) contributed by one sample whose value moves at dv_dy, dv_dx per feature pixel,
// weighted by `scale_g` = upstream gradient / count. Adds into box_grad[0..3] (x1, y1, x2, y2).
template <typename T>
MINIDET_HOST_DEVICE inline void add_box_gradient(const RoiBox<T>& b, const RoiSample<T>& s, T dv_dy, T dv_dx,
                                                 T scale_g, T spatial_scale, T* box_grad) {
  const T gy = scale_g * dv_dy * spatial_scale, gx = scale_g * dv_dx * spatial_scale;
  box_grad[0] += gx * (b.w_moves ? T(1) - s.a_x : T(1));
  box_grad[1] += gy * (b.h_moves ? T(1) - s.a_y : T(1));
  box_grad[2] += b.w_moves ? gx * s.a_x : T(0);
  box_grad[3] += b.h_moves ? gy * s.a_y : T(0);
}

// ---- launchers --------------------------------------------------------------------------------------------
// input: contiguous (N, C, H, W); rois: contiguous (K, 5), validated; output: contiguous (K, C, ph, pw);
// argmax: contiguous int64 like output in max mode, undefined in avg mode.
void roi_align_forward_cpu(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                           const RoiAlignGeometry& g);
// grad_input (N, C, H, W) is written (not accumulated); undefined when not needed. grad_rois (K, 5) likewise.
// input is needed only for grad_rois.
void roi_align_backward_cpu(const Tensor& grad_output, const Tensor& input, const Tensor& rois,
                            const Tensor& argmax, const Tensor& grad_input, const Tensor& grad_rois,
                            const RoiAlignGeometry& g);
#if MINIDET_WITH_CUDA
void roi_align_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                            const RoiAlignGeometry& g);
// deterministic: the sorted terms or the tile gather (roi_align_sorted.cuh, roi_align_gather.cuh; the CPU's
// order and bits) instead of atomicAdd (as every op takes DeterministicMode: a flag from its .cpp to its
// CUDA launcher).
void roi_align_backward_input_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                                   const Tensor& grad_input, const RoiAlignGeometry& g, bool deterministic);
void roi_align_backward_rois_cuda(const Tensor& grad_output, const Tensor& input, const Tensor& rois,
                                  const Tensor& argmax, const Tensor& grad_rois, const RoiAlignGeometry& g);
#endif

}  // namespace minidet::ops::detail
