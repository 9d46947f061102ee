// BoxCoder: how a detector writes a box as a regression target relative to a reference box (an anchor or a
// proposal), and reads it back. The parameterisation of R-CNN (Girshick et al. 2014), as in torchvision's
// BoxCoder.
//
// For a reference box P and a target box G, both (x1, y1, x2, y2), with widths w = x2 - x1, heights h and
// centres c = x1 + w/2 (the same along y), and per-coordinate weights (wx, wy, ww, wh):
//
//   encode(G, P):  dx = wx (Gcx - Pcx) / Pw     dy = wy (Gcy - Pcy) / Ph
//                  dw = ww log(Gw / Pw)         dh = wh log(Gh / Ph)
//
//   decode(d, P):  dw' = min(dw / ww, clip), dh' = min(dh / wh, clip),   clip = log(1000 / 16) by default
//                  cx = dx / wx * Pw + Pcx      w = exp(dw') Pw       (the same along y)
//                  box = (cx - w/2, cy - h/2, cx + w/2, cy + h/2)
//
// The weights scale the targets to similar magnitudes: (1, 1, 1, 1) for the RPN, (10, 10, 5, 5) for the box
// head. The clamp keeps exp from overflowing on a wild prediction: no box grows more than 1000/16 = 62.5x
// its reference in one decode.
//
// decode is differentiable in the deltas (the backward of the RPN-free box head losses and of any loss on
// decoded boxes): d box / d dx = Pw / wx along x1 and x2, d box / d dw = -+ w / (2 ww) (x1, x2), and 0
// where dw / ww was clamped (above the clip the box no longer depends on dw). It is composed from
// differentiable ops, so the reference boxes get gradients too when they require them (torchvision's
// anchors and detached proposals do not). encode is composed the same way, though it is normally applied
// to constants (matched ground truth and anchors). When no gradient is needed (grad mode off, or no input
// requires grad: the targets, the detached proposals), both run as one kernel instead (ops/box_coding),
// with the same operations in the same order and so the same bits.
//
// Shapes: encode takes (..., 4) and (..., 4) of the same shape and returns (..., 4). decode takes deltas
// (N, 4K) and reference boxes (N, 4) and returns (N, 4K): K boxes per reference (K = 1 for the RPN, C + 1
// class-specific boxes for the head), the k-th from deltas[:, 4k : 4k+4]. float32 or float64, any device,
// both arguments on the same device with the same dtype. Reference boxes must have positive widths and
// heights; encode's targets too (log of a non-positive ratio is NaN or -inf). These values are not checked:
// on CUDA that would cost a synchronisation per call, and anchors and proposals satisfy it by construction.
#pragma once

#include <array>
#include <cmath>

#include "core/tensor.h"

namespace minidet::models {

class BoxCoder {
 public:
  // Weights must be positive and finite; the clip is applied to dw / ww and dh / wh.
  explicit BoxCoder(std::array<double, 4> weights = {1.0, 1.0, 1.0, 1.0},
                    double bbox_xform_clip = std::log(1000.0 / 16.0));

  Tensor encode(const Tensor& target_boxes, const Tensor& reference_boxes) const;
  Tensor decode(const Tensor& deltas, const Tensor& reference_boxes) const;

  const std::array<double, 4>& weights() const { return weights_; }
  double bbox_xform_clip() const { return bbox_xform_clip_; }

 private:
  std::array<double, 4> weights_;
  double bbox_xform_clip_;
};

}  // namespace minidet::models
