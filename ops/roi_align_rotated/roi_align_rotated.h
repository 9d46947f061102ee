// roi_align_rotated: RoIAlign over rotated boxes (oriented detection: aerial images, text), forward and
// backward to the input features.
//
//   input (N, C, H, W), rois (K, 6) rows (batch_index, cx, cy, w, h, angle) in input-image pixels, the angle
//   in radians; output (K, C, pooled_h, pooled_w)
//
// Forward, for RoI k on image n = rois[k, 0], with s = spatial_scale and off = aligned ? 0.5 : 0:
//   centre in feature pixels   Cx = s*cx - off,  Cy = s*cy - off
//   size                       roi_w = s*w,  roi_h = s*h;   aligned = false keeps the legacy minimum:
//                              roi_w = max(roi_w, 1), roi_h = max(roi_h, 1)
//   angle                      theta = angle, or -angle when clockwise = true
//   bins and samples           bin_w = roi_w / pooled_w; grid_w samples per bin along the box's own x axis,
//                              grid_w = sampling_ratio > 0 ? sampling_ratio : max(1, ceil(|roi_w| / pooled_w))
//                              (adaptive: per RoI and axis); same for h. count = grid_h * grid_w.
//   sample j = q*grid_w + ix along the box's x axis (bin q, sample ix in it), i = p*grid_h + iy along y,
//   in the box frame (origin at the centre, before rotation):
//                              u = -roi_w/2 + (j + 0.5) * bin_w/grid_w,   v = -roi_h/2 + (i + 0.5) * bin_h/grid_h
//   rotated into the map       x = Cx + u*cos(theta) + v*sin(theta)
//                              y = Cy - u*sin(theta) + v*cos(theta)
//   output                     out[k, c, p, q] = (1/count) * sum over the bin's samples of bilinear(input[n, c], y, x)
//   bilinear reads follow ops/common/bilinear.h: a sample outside [-1, H] x [-1, W] reads 0 and still counts;
//   between -1 and 0, or past the last row/column, it reads the clamped border.
//
// Backward to the input (the adjoint of the bilinear reads): each sample hands its share of the upstream
// gradient to its four neighbours with their bilinear weights w_j,
//   d input[n, c, neighbour_j] += dL/dout[k, c, p, q] * w_j / count        for every sample of bin (p, q).
// Backward to the rois is NOT provided: calling the op with rois that require grad (while grad mode is on)
// is an error that says so. (The box gradient exists almost everywhere, as in roi_align, but the rotated
// op does not implement it; detach the rois.)
//
// The angle convention. theta > 0 turns the box counter-clockwise as seen on screen (y pointing down): the
// box's x axis (u) points along (cos theta, -sin theta) in (x, y), so a quarter turn points it up. This is
// detectron2's and mmcv's ROIAlignRotated convention. AerialDetection's MMDetection-based rotated RoIAlign
// kernel (docs/references.md) rotates the other way (x = Cx + u cos - v sin, y = Cy + u sin + v cos): its
// output is this op's with clockwise = true.
// At angle 0 the samples are exactly roi_align's on the box (cx - w/2, cy - h/2, cx + w/2, cy + h/2)
// (tested; with aligned = false the two agree whenever s*w >= 1 and s*h >= 1, because below that roi_align
// grows the box from its corner and this op from its centre).
//
// Edge-case policy (identical on CPU and CUDA, float32 and float64; tested):
//   - K = 0 gives (0, C, pooled_h, pooled_w); N = 0 requires K = 0 (no batch index can be valid); the input
//     gradient is then all zeros.
//   - RoIs partly or fully outside the map: the band rule above; a box entirely outside reads 0.
//   - Zero-size RoIs (w = 0 or h = 0, aligned = true): every sample of that axis sits on the centre line; the
//     adaptive grid keeps at least one sample, so the output is continuous as a box shrinks.
//   - Negative w or h ("inverted") are not reordered: the samples walk from +|w|/2 to -|w|/2, the same
//     formula with no special case (roi_align does the same with x2 < x1, so angle 0 still agrees).
//   - No NaN from finite inputs. NaN or Inf in the rois and bad batch indices are errors; so are output size
//     < 1, a non-finite or non-positive spatial_scale, a non-4-D input, rois of the wrong shape, dtype or
//     device.
//
// Kernels: the CPU precomputes every sample's neighbours and weights once per RoI (shared by all channels,
// chunks of RoIs at a time), parallel over (RoI, channel) in forward and over channels in backward (no two
// threads write one element; deterministic). CUDA (roi_align_rotated_cuda.cu): roi_align's channel-last
// kernels (a warp = 32 channels of one bin sharing one geometry computation, NHWC reads and atomics) with
// the rotated sample positions; under DeterministicMode roi_align's sorted terms (fixed sampling ratio:
// ops/roi_align/roi_align_sorted.cuh) or its tile gather (adaptive: roi_align_gather.cuh) replace the
// atomics: the same bits every run, in the CPU's order of additions. Both
// devices compute the sample positions with the same unfused products (roi_align_rotated_kernels.h); only
// their math libraries' sin and cos may differ in the last bit.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace minidet {

struct RoIAlignRotatedOptions {
  int64_t pooled_h = 7, pooled_w = 7;
  double spatial_scale = 1.0;
  int64_t sampling_ratio = 0;  // samples per bin along each box axis; <= 0: adaptive, per RoI
  bool aligned = true;
  bool clockwise = false;  // true: the angle turns the box clockwise on screen (theta = -angle)
  // Check the rois' values (finite, batch index in range): on CUDA one device-to-host copy per call. A
  // caller whose rois are finite by construction (a detector's own proposals) turns it off, as
  // RoIAlignOptions::check_roi_values; a bad row is then undefined behaviour, never checked.
  bool check_roi_values = true;

  RoIAlignRotatedOptions& set_output_size(int64_t size) { return set_output_size(size, size); }
  RoIAlignRotatedOptions& set_output_size(int64_t h, int64_t w) { pooled_h = h; pooled_w = w; return *this; }
  RoIAlignRotatedOptions& set_spatial_scale(double s) { spatial_scale = s; return *this; }
  RoIAlignRotatedOptions& set_sampling_ratio(int64_t r) { sampling_ratio = r; return *this; }
  RoIAlignRotatedOptions& set_aligned(bool a) { aligned = a; return *this; }
  RoIAlignRotatedOptions& set_clockwise(bool c) { clockwise = c; return *this; }
  RoIAlignRotatedOptions& set_check_roi_values(bool c) { check_roi_values = c; return *this; }
};

// Differentiable with respect to input only; rois must not require grad (see above). rois must have
// input's dtype and device.
Tensor roi_align_rotated(const Tensor& input, const Tensor& rois, const RoIAlignRotatedOptions& options = {});

}  // namespace minidet
