// take_rows: the rows a ranking picked, image by image, with no host synchronisation.
//
//   y = take_rows(x, index)     x: (B, K, C) floating, index: (B, T) int64 on x's device
//   y[b, t, :] = x[b, index[b, t], :]                                               y: (B, T, C)
//
// It is gather along dim 1 with one index per row instead of one per element, for the detector's
// bookkeeping: the top-k anchors' deltas (rpn_proposals), the proposals that survive NMS in rank order, the
// sampled RoIs' boxes and targets (roi_sampling). Those indices come from topk, argsort or sort along the
// same dim, so they are in range by construction, and gather's host-side check of every index value (a
// device-to-host copy on CUDA, so a synchronisation per call) would cost a training step its sync-free path.
//
// Bad indices still never read out of bounds:
//   CPU   every index is checked; one outside [0, K) throws, naming it.
//   CUDA  the kernel checks each index as it reads: one outside [0, K) gives a row of NaN, which no
//         detector output survives unnoticed (minidet train stops at the first non-finite loss).
//
// Not recorded by autograd, so there is no backward: x must not require grad while grad mode is on (use
// gather, whose backward is a scatter-add, for a differentiable pick).
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor take_rows(const Tensor& x, const Tensor& index);

}  // namespace minidet
