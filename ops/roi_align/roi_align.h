// roi_align: bilinear RoI pooling (RoIAlign, Mask R-CNN: He et al. 2017, section 3), differentiable in the
// features AND the boxes. Sources: docs/references.md.
//
//   input (N, C, H, W), rois (K, 5) rows (batch_index, x1, y1, x2, y2) in input-image pixels
//   output (K, C, pooled_h, pooled_w)
//
// Forward, for RoI k on image n = rois[k, 0], with s = spatial_scale and off = aligned ? 0.5 : 0:
//   box in feature pixels:  start_x = s*x1 - off,  roi_w = s*(x2 - x1)      (same for y)
//                           aligned = false keeps the legacy minimum size: roi_w = max(roi_w, 1)
//   bins:                   bin_w = roi_w / pooled_w;  grid_w samples per bin along x, where
//                           grid_w = sampling_ratio                          if sampling_ratio > 0
//                                  = max(1, ceil(|roi_w| / pooled_w))        otherwise (adaptive, per RoI)
//   sample (iy, ix) of bin (p, q), its fractional position a in [0, 1] inside the box:
//       a_x = (q + (ix + 0.5) / grid_w) / pooled_w,    x = start_x + a_x * roi_w      (same for y)
//   value v = bilinear(input[n, c], y, x)   with ops/common/bilinear.h's border rules: a sample outside
//             [-1, H] x [-1, W] reads 0 (and still counts in the average); between -1 and 0, or past the
//             last row, it reads the clamped border.
//   avg:  out[k, c, p, q] = sum over the grid_h*grid_w samples of v / (grid_h*grid_w)
//   max:  out[k, c, p, q] = the largest sample v; the FIRST sample in row-major (iy, ix) order wins a tie,
//         a NaN sample wins over any number. The winning sample's index iy*grid_w + ix is kept for backward.
//
// Backward to the input (the adjoint of the bilinear reads): every sample hands its share of the upstream
// gradient g = dL/dout[k, c, p, q] to its four neighbours with their bilinear weights,
//   avg:  d input[n, c, neighbour j] += g * w_j / (grid_h*grid_w)      for every sample of the bin
//   max:  d input[n, c, neighbour j] += g * w_j                         for the winning sample only.
//
// Backward to the RoI coordinates. The samples move with the box: with h = s*(y2 - y1) unclamped,
//   dy/dy1 = s*(1 - a_y),  dy/dy2 = s*a_y,   dx/dx1 = s*(1 - a_x),  dx/dx2 = s*a_x
// (aligned = false with roi_h clamped to 1: dy/dy1 = s, dy/dy2 = 0). The sampled value moves with the
// sample, dv/dy = sum_j (d w_j / dy) * input[neighbour j] (bilinear.h gives d w_j / dy and d w_j / dx), so
//   dL/dy1 = sum over outputs and (counted) samples of g * (1/count) * dv/dy * dy/dy1       (same for y2, x1, x2)
// with count = grid_h*grid_w in avg mode and only the winning sample (count 1) in max mode. The batch-index
// column gets no gradient (zeros). The output is differentiable in the box almost everywhere; it is NOT
// where a sample crosses an integer pixel line (the bilinear weights have kinks there), the clamp lines
// y = 0 / y = H-1 or the band edge y = -1 / y = H (a jump to 0), where the adaptive grid size changes
// (count jumps; the formula treats it as constant), where the legacy clamp roi_h = 1 engages, and where
// the winning sample of a max bin changes. Gradient checks therefore use a fixed sampling ratio and boxes
// whose samples stay away from those lines.
//
// Edge-case policy (tested):
//   - K = 0 gives (0, C, ph, pw); N = 0 requires K = 0 (no batch index can be valid). Gradients are zeros.
//   - RoIs partly or fully outside the map: samples follow the band rule above, a box entirely outside
//     [-1, H] x [-1, W] outputs 0 (avg) or 0 (max: every sample reads 0) and gets zero gradients.
//   - Zero-size RoIs (x2 = x1): every sample sits at the same point, so the output is the bilinear value
//     there. The adaptive grid has at least one sample (torchvision's would be empty and output 0): the
//     output then stays continuous as a box shrinks to a point.
//   - Inverted RoIs (x2 < x1) are not reordered: with aligned = true, roi_w is negative and the bins walk
//     from x1 towards x2 (the mirror image of the box x2..x1), the same formula with no special case, so
//     the output and its box gradient stay smooth through x2 = x1; adaptive grids use |roi_w|. With
//     aligned = false the legacy clamp makes roi_w = 1.
//   - No NaN is ever produced from finite inputs; NaN or Inf coordinates and bad batch indices are errors
//     (unless options.check_roi_values is off: see there).
//
// Kernels: CPU precomputes every sample's neighbours, weights and weight derivatives once per chunk of RoIs
// (shared by all channels), OpenMP over (RoI, channel) in forward and over (image, 8-channel block) in
// backward, so no two threads write one element. CUDA (roi_align_cuda.cu): channel-last (NHWC) reads and
// atomics, a warp = 32 channels of one bin sharing one geometry computation. Under DeterministicMode the
// input gradient adds every term in the CPU's order, so it equals the CPU's bit for bit: the average with a
// fixed sampling ratio sorts its terms by pixel (roi_align_sorted.cuh), then a team of lanes per pixel, each
// lane a vector of channels, adds them; adaptive sampling and max mode take a gather over tiles of the input gradient
// (roi_align_gather.cuh: a warp per tile and 32 channels walks the RoIs in order). The box gradient never
// uses atomics. The only host synchronisation is the RoI value
// check (ops/common/roi_checks.h; optional). float32 and float64; the input may be non-contiguous.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace minidet {

enum class RoiPoolMode { Avg, Max };

struct RoIAlignOptions {
  int64_t pooled_h = 7, pooled_w = 7;
  double spatial_scale = 1.0;
  int64_t sampling_ratio = 0;  // samples per bin along each axis; <= 0: adaptive, per RoI
  RoiPoolMode pool_mode = RoiPoolMode::Avg;
  bool aligned = true;
  // false skips the check of the rois' values (finite coordinates, batch index in [0, N)) and with it the
  // op's host synchronisation on CUDA. Only for callers that vouch for every row because they built it:
  // FasterRCNN does (its proposals are finite by construction, its ground truth is checked on the host).
  // A bad row then reads outside the input, as torchvision's kernel would: never turn this off for rois
  // that come from outside.
  bool check_roi_values = true;

  RoIAlignOptions& set_output_size(int64_t size) { return set_output_size(size, size); }
  RoIAlignOptions& set_output_size(int64_t h, int64_t w) { pooled_h = h; pooled_w = w; return *this; }
  RoIAlignOptions& set_spatial_scale(double s) { spatial_scale = s; return *this; }
  RoIAlignOptions& set_sampling_ratio(int64_t r) { sampling_ratio = r; return *this; }
  RoIAlignOptions& set_pool_mode(RoiPoolMode m) { pool_mode = m; return *this; }
  RoIAlignOptions& set_aligned(bool a) { aligned = a; return *this; }
  RoIAlignOptions& set_check_roi_values(bool c) { check_roi_values = c; return *this; }
};

// Differentiable w.r.t. input and rois (columns 1..4). rois must have input's dtype and device.
Tensor roi_align(const Tensor& input, const Tensor& rois, const RoIAlignOptions& options = {});

}  // namespace minidet
