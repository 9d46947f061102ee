// RotatedBoxCoder: BoxCoder for rotated boxes, the parameterisation of RRPN (Ma et al. 2018, "Arbitrary-
// Oriented Scene Text Detection via Rotation Proposals", arXiv:1703.01086) and of detectron2's
// Box2BoxTransformRotated: R-CNN's four deltas plus one for the angle.
//
// The convention. A rotated box is a row (cx, cy, w, h, a): the centre, the width along the box's own x axis,
// the height along its own y axis, and the angle a in radians, counter-clockwise on screen (image y points
// down), as ops/roi_align_rotated/roi_align_rotated.h: the box's x axis points along (cos a, -sin a). A box is
// the same box after a += k pi (w and h are never swapped), so one range holds every box once:
//
//   a in [-pi/2, pi/2),     normalize_angle(a) = a - pi floor((a + pi/2) / pi)
//
// normalize_angle below is THE normalisation for rotated boxes in minidet: every block that makes or compares
// angles (anchors, matching, decoding, NMS) maps them with it, so two descriptions of one box agree.
//
// For a reference box P and a target box G, both (cx, cy, w, h, a), and weights (wx, wy, ww, wh, wa):
//
//   encode(G, P):  dx = wx (Gcx - Pcx) / Pw     dy = wy (Gcy - Pcy) / Ph
//                  dw = ww log(Gw / Pw)         dh = wh log(Gh / Ph)
//                  da = wa normalize_angle(Ga - Pa)
//
//   decode(d, P):  dw' = min(dw / ww, clip), dh' = min(dh / wh, clip),   clip = log(1000 / 16) by default
//                  cx = dx / wx * Pw + Pcx      w = exp(dw') Pw       (the same along y with Ph)
//                  a  = normalize_angle(Pa + da / wa)
//
// The centre offsets are in image axes by default, as RRPN and detectron2 write them: the offset is scaled by
// the reference's size but not turned with it. OffsetFrame::kBox measures it along the reference's own axes
// u = (cos Pa, -sin Pa) and v = (sin Pa, cos Pa) instead, as RoI Transformer (Ding et al. 2019) and Oriented
// R-CNN (Xie et al. 2021) do (mmrotate's DeltaXYWHAOBBoxCoder with proj_xy):
//
//   encode:  dx = wx ((Gcx - Pcx) cos Pa - (Gcy - Pcy) sin Pa) / Pw
//            dy = wy ((Gcx - Pcx) sin Pa + (Gcy - Pcy) cos Pa) / Ph
//   decode:  (cx, cy) = (Pcx, Pcy) + (dx / wx) Pw u + (dy / wy) Ph v
// (in the box frame the centre also depends on Pa, through cos and sin: differentiable like the rest)
//
// Why it matters: in image axes a bar turned by 90 degrees has its thin side along x, but its x offset is
// divided by its long side Pw, so a pixel of error across the bar (which decides its IoU) costs a tenth of a
// pixel along it. Along the box's axes, each offset is scaled by the side it moves across. At angle 0 the two
// frames agree. Because the angle
// difference is wrapped into [-pi/2, pi/2), a target never asks for more than a quarter turn either way:
// Ga - Pa = 0.9 pi is the same as -0.1 pi and encodes as da = -0.1 pi wa. (RRPN keeps the difference in
// one period of pi by adding k pi; detectron2 wraps it into [-180, 180) degrees. Here a += pi is the same
// box, so the period is pi, and the range is the one normalize_angle uses.) decode(encode(G, P), P) gives G
// back with its angle normalised (and up to rounding).
//
// Edge swap (mmrotate's DeltaXYWHAOBBoxCoder edge_swap). G is also the box (Gcx, Gcy, Gh, Gw, Ga + pi/2): its
// sides swapped and turned a quarter. With edge_swap, encode describes G in whichever of the two ways turns
// less from P, so |da| <= pi/4 wa:
//
//   d = normalize_angle(Ga - Pa);  swap = |d| > pi/4
//   swap:  dw = ww log(Gh / Pw),  dh = wh log(Gw / Ph),  da = wa normalize_angle(d + pi/2)
//
// Why: a near-square G next to a P turned about a quarter from it (a circle, a square, a proposal that grew
// the other way) otherwise asks for a turn of almost pi/2 and for sides swapped by the regression, two large
// targets for a box that is already nearly right; near |d| = pi/2 the target jumps from one end of the range
// to the other. decode is unchanged: the box it returns is G, described from P's side.
//
// Weights: (1, 1, 1, 1, 1) for an RPN; a box head uses larger ones, such as BoxCoder's (10, 10, 5, 5) with
// wa = 1. The clip keeps exp from overflowing on a wild prediction, as in BoxCoder.
//
// Gradients. Both are composed from differentiable tensor ops (slicing, elementwise, stack), so they run on
// CPU and CUDA and differentiate in every input that requires grad: decode in the deltas and the reference
// boxes, as BoxCoder's composed form. For x, y, w, h the derivatives are BoxCoder's (0 where dw / ww or dh / wh
// was clipped). The wrap subtracts pi floor(...), which is piecewise constant (ops/elementwise floor records a
// zero gradient), so d a / d da = 1 / wa and d a / d Pa = 1 everywhere except exactly at a wrap point, where
// a jumps by pi and has no derivative; likewise d da / d Ga = wa. There is no one-kernel twin (BoxCoder's
// ops/box_coding): both always run the composed form.
//
// Shapes: encode takes (..., 5) and (..., 5) of the same shape and returns (..., 5). decode takes deltas
// (N, 5K) and reference boxes (N, 5) and returns (N, 5K): K boxes per reference, the k-th from
// deltas[:, 5k : 5k+5]. float32 or float64, any device, both arguments on the same device with the same dtype.
// Widths and heights must be positive (log of a non-positive ratio is NaN or -inf); as in BoxCoder they are not
// checked, because on CUDA that would cost a synchronisation per call.
#pragma once

#include <array>
#include <cmath>

#include "core/tensor.h"

namespace minidet::models {

// THE angle normalisation for rotated boxes: a - pi floor((a + pi/2) / pi), in [-pi/2, pi/2) up to rounding
// at the two ends (an angle within an ulp or so of pi/2 + k pi may land on either side). The tensor form is
// differentiable with d/da = 1 except exactly at a wrap point (a = pi/2 + k pi), float32 or float64, any
// device; the scalar form is its twin (the same float64 bits as the tensor form on the CPU).
Tensor normalize_angle(const Tensor& a);
double normalize_angle(double a);

// Which axes the centre offset (dx, dy) is measured along: the image's (RRPN, detectron2) or the reference
// box's own (RoI Transformer, Oriented R-CNN). See above.
enum class OffsetFrame { kImage, kBox };

class RotatedBoxCoder {
 public:
  // Weights (wx, wy, ww, wh, wa) must be positive and finite; the clip, applied to dw / ww and dh / wh, finite.
  explicit RotatedBoxCoder(std::array<double, 5> weights = {1.0, 1.0, 1.0, 1.0, 1.0},
                           double bbox_xform_clip = std::log(1000.0 / 16.0),
                           OffsetFrame frame = OffsetFrame::kImage, bool edge_swap = false);

  Tensor encode(const Tensor& target_boxes, const Tensor& reference_boxes) const;
  Tensor decode(const Tensor& deltas, const Tensor& reference_boxes) const;

  const std::array<double, 5>& weights() const { return weights_; }
  double bbox_xform_clip() const { return bbox_xform_clip_; }
  OffsetFrame frame() const { return frame_; }
  bool edge_swap() const { return edge_swap_; }

 private:
  std::array<double, 5> weights_;
  double bbox_xform_clip_;
  OffsetFrame frame_;
  bool edge_swap_;
};

}  // namespace minidet::models
