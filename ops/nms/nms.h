// Non-maximum suppression: keep the best-scoring box of every cluster of overlapping boxes.
//
//   order = boxes sorted by score, highest first, with a stable sort (equal scores keep input order)
//   for each box b in that order:
//     if no box kept so far suppresses b: keep b
//   a kept box k suppresses b when IoU(k, b) > iou_threshold      (strictly greater: IoU == threshold keeps b)
//   result = the kept boxes' input indices, int64, in the order they were kept (descending score)
//
// IoU is ops/boxes/box_math.h's, computed once per pair with explicitly rounded +, -, *, / so that the CPU
// and CUDA results are identical, bit for bit and so box for box:
//   width  = max(x2 - x1 + offset, 0)      (offset 0 by default; 1 reproduces the legacy "+1 pixel" widths
//   area   = width * height                  of py-faster-rcnn's nms_kernel.cu, docs/references.md)
//   IoU    = inter / (area_a + area_b - inter), and 0 when inter == 0
// so a zero-area box (and an inverted one, x2 < x1) has IoU 0 with everything: it is never suppressed and
// never suppresses. No gradient: the result is a set of indices.
//
// batched_nms(boxes, scores, class_ids, ...) runs NMS within each class: boxes of different classes never
// suppress each other. Guarantee: the suppression test itself asks "same class AND IoU > threshold", on both
// devices, so a pair of different classes can never produce a suppression, whatever the coordinates are.
// (The usual trick instead shifts each class's boxes by class * (max coordinate + 1) so that classes cannot
// overlap; with negative coordinates, with max + 1 rounding away in float32 at large magnitudes, or with
// huge class ids, shifted boxes can still overlap and wrongly suppress each other. minidet never shifts.)
// Since classes do not interact, running the one greedy pass over all boxes in global score order keeps
// exactly the union of the per-class results, already in descending score order.
//
// Inputs: boxes (N, 4) float32 or float64 as (x1, y1, x2, y2); scores (N) of the same dtype and device;
// class_ids (N) int64 (any values, negative included; floating class ids are refused rather than rounded);
// iou_threshold >= 0; offset 0 or 1. Every coordinate and score must be finite (NaN or Inf is an error).
// N = 0 returns an empty int64 tensor. Any strides.
//
// How:
// - CPU: sort, precompute each box's area, then the greedy pass over a shrinking list of live candidates:
//   each kept box filters the list, so suppressed boxes are never looked at again and the pass ends when the
//   list is empty. The list is held in one array per coordinate, so a kept box is tested against all the
//   live ones in one vectorised loop; with classes, each class's pass runs on a thread of its own.
// - CUDA: py-faster-rcnn's bitmask NMS, then the greedy pass on the GPU as well (nms_cuda.cu explains it):
//   the IoU test of every pair (i < j in score order) packed as one 64-bit word per (box, block of 64 boxes),
//   only the tiles on and above the diagonal computed; then one thread block walks the 64-box blocks in
//   order, keeping a "removed" bit per box in shared memory. The whole mask never leaves the GPU: the only
//   device-to-host copy is the kept count (with the finite-input check, folded into the same copy).
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold, int offset = 0);
Tensor batched_nms(const Tensor& boxes, const Tensor& scores, const Tensor& class_ids, double iou_threshold,
                   int offset = 0);

}  // namespace minidet
