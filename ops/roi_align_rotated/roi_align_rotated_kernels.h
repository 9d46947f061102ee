// roi_align_rotated's box frame and sample positions, shared by the CPU and CUDA kernels (and the
// walkthrough) so both devices sample the same points, and the kernel entry points. Kernels take
// contiguous tensors.
//
// Every product goes through unfused_mul (roi_align_kernels.h): nvcc would otherwise fuse u*cos + x into one
// FMA, the host compiler does not. The one difference left is sin and cos: CUDA's and glibc's may differ in
// the last bit for some angles, which moves those boxes' samples by an ulp.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/common/bilinear.h"
#include "ops/roi_align/roi_align_kernels.h"  // adaptive_grid (the same adaptive sampling as roi_align), unfused_mul

namespace minidet::ops::detail {

struct RotatedGeometry {
  int64_t num_rois = 0, channels = 0, height = 0, width = 0;
  int64_t pooled_h = 1, pooled_w = 1;
  double spatial_scale = 1.0;
  int64_t sampling_ratio = 0;
  bool aligned = true, clockwise = false;
};

// One RoI in feature pixels (roi_align_rotated.h's formulas). Sample j along the box's x axis sits at
// u_j = start_u + (j + 0.5) * step_u, j = q*grid_w + ix in [0, pooled_w*grid_w); same for i and v.
template <typename T>
struct RotatedFrame {
  int64_t batch;
  T center_x, center_y;
  T cos_theta, sin_theta;
  T start_u, start_v;  // -roi_w/2, -roi_h/2: the box's corner in its own frame
  T step_u, step_v;    // bin_w/grid_w, bin_h/grid_h: the distance between neighbouring samples
  int64_t grid_w, grid_h;
  T count;             // grid_h * grid_w, what a bin's sum is divided by
};

template <typename T>
MINIDET_HOST_DEVICE inline RotatedFrame<T> rotated_frame(const T* roi, const RotatedGeometry& g) {
  const T scale = static_cast<T>(g.spatial_scale), offset = g.aligned ? T(0.5) : T(0);
  RotatedFrame<T> f;
  f.batch = static_cast<int64_t>(roi[0]);
  f.center_x = unfused_mul(roi[1], scale) - offset;
  f.center_y = unfused_mul(roi[2], scale) - offset;
  T roi_w = roi[3] * scale, roi_h = roi[4] * scale;
  if (!g.aligned) {  // the legacy minimum size of one feature pixel
    roi_w = roi_w > T(1) ? roi_w : T(1);
    roi_h = roi_h > T(1) ? roi_h : T(1);
  }
  const T theta = g.clockwise ? -roi[5] : roi[5];
  f.cos_theta = std::cos(theta);
  f.sin_theta = std::sin(theta);
  f.grid_w = g.sampling_ratio > 0 ? g.sampling_ratio : adaptive_grid(roi_w, g.pooled_w);
  f.grid_h = g.sampling_ratio > 0 ? g.sampling_ratio : adaptive_grid(roi_h, g.pooled_h);
  f.start_u = -roi_w / T(2);
  f.start_v = -roi_h / T(2);
  f.step_u = roi_w / static_cast<T>(g.pooled_w * f.grid_w);
  f.step_v = roi_h / static_cast<T>(g.pooled_h * f.grid_h);
  f.count = static_cast<T>(f.grid_h * f.grid_w);
  return f;
}

// Map position (y, x) of sample (i, j) (i along the box's y axis, j along its x axis).
template <typename T>
MINIDET_HOST_DEVICE inline void rotated_sample(const RotatedFrame<T>& f, int64_t i, int64_t j, T* y, T* x) {
  const T u = f.start_u + unfused_mul(static_cast<T>(j) + T(0.5), f.step_u);
  const T v = f.start_v + unfused_mul(static_cast<T>(i) + T(0.5), f.step_v);
  *x = f.center_x + unfused_mul(u, f.cos_theta) + unfused_mul(v, f.sin_theta);
  *y = f.center_y - unfused_mul(u, f.sin_theta) + unfused_mul(v, f.cos_theta);
}

// The bilinear read (ops/common/bilinear.h) of sample (iy, ix) of bin (p, q): the one sample of the CPU
// table builder and the CUDA kernels, so both devices read the same neighbours.
template <typename T>
MINIDET_HOST_DEVICE inline BilinearSample<T> rotated_bin_sample(const RotatedFrame<T>& f, const RotatedGeometry& g,
                                                                int64_t p, int64_t q, int64_t iy, int64_t ix) {
  T y, x;
  rotated_sample(f, p * f.grid_h + iy, q * f.grid_w + ix, &y, &x);
  return bilinear_sample(y, x, g.height, g.width);
}

// Calls visit(sample) with every sample of bin (p, q), in (iy, ix) order (the CPU's loop).
template <typename T, typename Visit>
inline void for_each_bin_sample(const RotatedFrame<T>& f, const RotatedGeometry& g, int64_t p, int64_t q,
                                Visit&& visit) {
  for (int64_t iy = 0; iy < f.grid_h; ++iy)
    for (int64_t ix = 0; ix < f.grid_w; ++ix) visit(rotated_bin_sample(f, g, p, q, iy, ix));
}

void roi_align_rotated_forward_cpu(const Tensor& input, const Tensor& rois, const Tensor& output,
                                   const RotatedGeometry& g);
// grad_input (N, C, H, W) is written, not accumulated.
void roi_align_rotated_backward_cpu(const Tensor& grad_output, const Tensor& rois, const Tensor& grad_input,
                                    const RotatedGeometry& g);
#if MINIDET_WITH_CUDA
void roi_align_rotated_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output,
                                    const RotatedGeometry& g);
void roi_align_rotated_backward_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& grad_input,
                                     const RotatedGeometry& g, bool deterministic);
#endif

}  // namespace minidet::ops::detail
