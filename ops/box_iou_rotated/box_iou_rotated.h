// box_iou_rotated: the pairwise intersection-over-union matrix of two sets of rotated boxes (the matching
// step of rotated detection: anchors to ground truth, proposals to ground truth, rotated NMS).
//
//   boxes1 a (N, 5), boxes2 b (M, 5), rows (cx, cy, w, h, a)              iou (N, M), iou[i, j] = IoU(a_i, b_j)
//
// The convention. Rotated boxes are rows (cx, cy, w, h, a): centre, width along the box's own x axis,
// height along its own y axis, a in radians, counter-clockwise on screen (image y pointing down) as
// ops/roi_align_rotated: the box's x axis points along (cos a, -sin a) and its y axis along (sin a, cos a)
// in (x, y) pixel coordinates, so the corners are (cx, cy) ± (w/2)(cos a, -sin a) ± (h/2)(sin a, cos a).
// The angle range is [-pi/2, pi/2): a box is the same box after a += k*pi (w and h are never swapped); IoU
// does not depend on the range, so box_iou_rotated accepts any finite angle.
//
// The math, per pair (rotated_box_math.h holds it, shared by the CPU and CUDA kernels and by nms_rotated):
//   1. Corners. With half_u = (|w|/2)(cos a, -sin a) and half_v = (|h|/2)(sin a, cos a):
//        p0 = c - half_u - half_v,  p1 = c + half_u - half_v,  p2 = c + half_u + half_v,  p3 = c - half_u + half_v
//      In this order the shoelace area is +|w||h| (the rotation has determinant +1): every box is a convex
//      quadrilateral with its interior on the left of each directed edge, cross(p_k+1 - p_k, x - p_k) >= 0.
//   2. Intersection, by polygon clipping (Sutherland & Hodgman 1974, "Reentrant polygon clipping"): start
//      from a's quadrilateral and cut it by the 4 half-planes of b's edges in turn. The intersection of
//      convex polygons is the intersection of one with the half-planes of the other, so after 4 passes
//      what is left is exactly a ∩ b: a convex polygon of at most 8 vertices (the fixed arrays hold 20, what
//      rounding can produce at worst; rotated_box_math.h counts them). Each pass walks the polygon's
//      edges, keeps the vertices inside (d >= 0, d the cross product above) and inserts the crossing
//      point prev + t (cur - prev), t = d_prev / (d_prev - d_cur), wherever d changes sign strictly.
//      Why clipping rather than detectron2's or mmcv's route (box_iou_rotated_utils: the 16 edge-edge
//      intersection points plus the corners inside the other box, ordered by a Graham-scan convex hull
//      around the lowest point): clipping produces the vertices already in order (no sort, no hull), and
//      its one division has a denominator that is a sum of two magnitudes, so nearly parallel edges
//      (angles 1e-7 apart) need no epsilon, where a line-line intersection divides by a 2x2 determinant
//      close to 0 and those codes skip |det| <= 1e-14 and compare angles to 1e-6: absolute thresholds that
//      do not scale with the boxes.
//   3. Areas by the shoelace formula, area = 1/2 sum cross(v_k - v_0, v_k+1 - v_0) (a fan from v_0): A_a and
//      A_b from the corners, I from the clipped polygon.
//   4. IoU = I / (A_a + A_b - I).
// Forward only: the op is not recorded by autograd (matching never needs its gradient). With grad mode on
// and an input that requires grad it refuses with an error that says so; detach the boxes or use a
// NoGradGuard.
//
// Precision. The geometry is computed in the input dtype, relative to a local origin: for the pair (a_i,
// b_j) the origin is a_i's centre, so a's corners are ±half_u ±half_v and b's centre is the difference of
// the centres. float32 boxes near (1e4, 1e4) therefore keep the resolution of their sizes, not of their
// positions. Every arithmetic operation is exactly rounded and never fused (box_math's _rn helpers), so the
// CPU and CUDA results differ only through sin and cos (which glibc and CUDA may round differently in the
// last bit): a few ulps, tested to 1e-12 in float64 and 1e-5 in float32.
//
// Edge-case policy (identical on CPU and CUDA, float32 and float64; tested, and judged against shapely's
// polygon areas by tests/reference/box_iou_rotated_reference.py):
//   - Identical boxes give exactly 1: b's corners are bit-identical to a's, every vertex lies exactly on
//     the clip lines (d = 0 exactly, as the cross products are never fused), the clip returns a's own
//     corners and I = A_a to the bit. A box inside the other gives the ratio of their areas.
//   - The same box written with a, a + pi or a - pi gives the same IoU up to the rounding of sin and cos.
//   - Zero-area boxes (w = 0 or h = 0) give 0 with every box, themselves included: never 0/0 = NaN.
//   - Negative w or h: |w| and |h| are used. The corner formula is symmetric in their signs (a negative w
//     names the same 4 corners), so the geometric answer is that of the box with |w| and |h|; no box is
//     refused for it, and no value check costs a device synchronisation.
//   - Epsilon policy: the clip itself uses exact signs, no epsilon. The only tolerance is a floor on the
//     result: an intersection area I <= 16 * epsilon(dtype) * (A_a + A_b) is rounding noise (the sliver a
//     shared edge leaves when its corners were rounded) and counts as empty, so boxes that share an edge or
//     touch at a corner give exactly 0. A real overlap that small (IoU below 32 epsilon: 7e-15 in float64,
//     4e-6 in float32) also reads 0. Measured on shared edges at random angles, the op's own noise is about
//     0.6 epsilon times the aspect ratio of the boxes, times (A_a + A_b): the floor absorbs it up to an
//     aspect of about 25; longer, thinner boxes sharing a long edge may leave an IoU of that size. (Boxes
//     whose centres were themselves rounded, e.g. a neighbour computed as c + w (cos a, -sin a) far from 0,
//     can truly overlap by more: that is their IoU, not noise.)
//   - Boxes whose axis-aligned bounds do not meet are disjoint: 0 without clipping (the test is exact).
//   - NaN or +-Inf in a box (any of its 5 values) gives NaN in every IoU of that box's row or column, as
//     box_iou does; the values are not checked on the host, which would cost a device synchronisation per
//     call on CUDA. Finite but enormous boxes whose area overflows are not supported.
//   - N = 0 or M = 0 gives an empty (N, M).
// float32 and float64, CPU and CUDA (same dtype and device for both inputs); inputs may be non-contiguous.
// References:
//   - I. E. Sutherland and G. W. Hodgman, "Reentrant polygon clipping", Communications of the ACM 17(1),
//     32-42, 1974: the clipping of step 2.
//   - detectron2 (detectron2/layers/csrc/box_iou_rotated/box_iou_rotated_utils.h) and mmcv
//     (mmcv/ops/csrc/common/box_iou_rotated_utils.hpp): the same IoU of counter-clockwise rotated boxes
//     (detectron2 takes the angle in degrees, minidet in radians), a different intersection method (see 2.);
//     detectron2 also shifts each pair to a local origin (the midpoint of the centres).
#pragma once

#include "core/tensor.h"

namespace minidet {

// (N, 5) x (M, 5) -> (N, M). Not differentiable: refuses inputs that require grad while grad mode is on.
Tensor box_iou_rotated(const Tensor& boxes1, const Tensor& boxes2);

}  // namespace minidet
