// box_iou: the pairwise intersection-over-union matrix of two sets of boxes, with a fused forward and a
// fused backward kernel (no N x M intermediates besides the output and its gradient).
//
//   boxes1 a (N, 4), boxes2 b (M, 4), both (x1, y1, x2, y2), no "+1" (DESIGN.md)
//   iou[i, j] = IoU(a_i, b_j)                                          (N, M)
//
// Per pair, with w = max(x2 - x1, 0) and h the same along y (box_math.h, shared with nms):
//   area_a = w_a h_a,   area_b = w_b h_b
//   iw = max(min(a.x2, b.x2) - max(a.x1, b.x1), 0),   ih the same along y,   I = iw ih
//   U = area_a + area_b - I,   IoU = I / U,   and IoU = 0 when I = 0 (zero-area or disjoint boxes: never NaN)
//
// Backward. With g = dL/dIoU for the pair, and IoU = I / U:
//   dIoU/dI = (1 + IoU) / U          (I appears in the numerator and, subtracted, in the union)
//   dIoU/darea_a = dIoU/darea_b = -IoU / U
//   dI/d(a.x2) = ih * [a.x2 is the min of the two x2],  dI/d(a.x1) = -ih * [a.x1 is the max of the two x1]
//   d area_a/d(a.x2) = h_a,  d area_a/d(a.x1) = -h_a        (and the same along y with iw, w_a)
// and the mirror image for b. On a tie (a.x1 == b.x1) the intersection edge belongs to both boxes and the
// gradient is split half and half, as PyTorch's maximum/minimum do. Where I = 0 the IoU is the constant 0
// on a neighbourhood (or we define it so at touching boxes) and the gradient is 0. When I > 0 both widths
// and heights are > 0, so the clamps of the areas never cut a gradient.
//   grad_a[i] = sum_j g[i, j] * dIoU(a_i, b_j)/da_i       grad_b[j] = sum_i g[i, j] * dIoU(a_i, b_j)/db_j
// Both sums run in a fixed order on the CPU and on CUDA (tiles reduced without atomics), so the gradient
// has the same bits from run to run on each device.
//
// NaN: a NaN coordinate gives NaN in every IoU of that box (checked in the kernel; checking on the host
// would cost a synchronisation per call), and no gradient. float32 and float64, CPU and CUDA; inputs may be
// non-contiguous. N = 0 or M = 0 gives an (N, M) empty result and zero gradients.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor box_iou(const Tensor& boxes1, const Tensor& boxes2);

}  // namespace minidet
