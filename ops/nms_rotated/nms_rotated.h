// Rotated non-maximum suppression: ops/nms's greedy NMS with box_iou_rotated's IoU.
//
//   order = boxes sorted by score, highest first, with a stable sort (equal scores keep input order)
//   for each box b in that order:
//     if no box kept so far suppresses b: keep b
//   a kept box k suppresses b when IoU(k, b) > iou_threshold      (strictly greater: IoU == threshold keeps b)
//   result = the kept boxes' input indices, int64, in the order they were kept (descending score)
//
// Everything but the IoU is ops/nms's contract and design (ops/nms/nms.h): the same stable score sort, the
// same strict test, batched_nms_rotated asking "same class AND IoU > threshold" (no coordinate shifts, so
// classes never interact whatever the coordinates and class ids), the same errors, N = 0 giving an empty
// int64 tensor. detectron2's nms_rotated (detectron2/layers/csrc/nms_rotated/) computes the same greedy NMS
// with its own rotated IoU; minidet's IoU is box_iou_rotated's (docs/references.md).
//
// Boxes are rows (cx, cy, w, h, a), a in radians, counter-clockwise on screen: the convention of
// ops/box_iou_rotated/box_iou_rotated.h, whose rotated_box_math.h computes the IoU here too. Any finite
// angle: a and a + pi name the same box, and they suppress each other (IoU 1 up to the rounding of sin and
// cos). Zero-area boxes (w = 0 or h = 0) have IoU 0 with everything: never suppressed, never suppressing.
//
// The IoU, and how the two devices agree. IoU(k, b) is rotated_box_math's rotated_box_iou(k, b), computed
// about the kept box's centre, the same value as box_iou_rotated(k, b) to the bit on the same device: each
// box's corners relative to its own centre (one sin and one cos per box) are computed once, before the pairs
// (nms_rotated_kernels.h shows why that changes no bit). All arithmetic is exactly rounded and never fused
// (ops/boxes/box_math.h), so the CPU and CUDA IoUs differ only through sin and cos, which glibc and CUDA may
// round differently in the last bit: a few ulps of the corners, hence of the IoU (box_iou_rotated's CUDA
// tests bound the difference by 1e-5 in float32 and 1e-12 in float64). So CPU and CUDA keep
// the same boxes unless a pair's IoU lies within that distance of the threshold, where either answer is
// right; the tests compare the devices on sets whose IoUs keep away from the thresholds. IoU is not exactly
// symmetric (the origin is the first box's centre): like box_iou_rotated's matrix, it is always asked with
// the better-scored box first, on both devices.
//
// batched_nms_rotated(boxes, scores, class_ids, t): NMS within each class (class_ids int64, any values).
// The same results as keep masks, with no host synchronisation (per image for a detector): nms_rotated_mask.h.
//
// Inputs: boxes (N, 5) float32 or float64; scores (N) of the same dtype and device; iou_threshold >= 0.
// Every box value and score must be finite: NaN or Inf is an error (on CUDA found by the kernels and reported
// through the one device-to-host copy NMS makes anyway, the kept count). Any strides. No gradient: the result
// is a set of indices (inputs that require grad are fine).
//
// How (the pieces of ops/nms, with a rotated pair test):
// - CPU: sort, precompute each box's corners, area and bounds once, then ops/nms's greedy pass over a
//   shrinking list of live candidates, one list per class. Pairs whose axis-aligned bounds do not meet are
//   rejected before any clipping.
// - CUDA: ops/nms's bitmask NMS (py-faster-rcnn's nms_kernel.cu, with the greedy walk on the GPU): a first
//   kernel gathers the boxes into score order and precomputes their corners (the pair kernel never calls sin
//   or cos), then ops/nms/nms_bitmask.cuh's mask kernel runs with the rotated pair test and ops/nms's greedy
//   walk reads the mask; the only device-to-host copy is the kept count with the finite-input flags.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor nms_rotated(const Tensor& boxes, const Tensor& scores, double iou_threshold);
Tensor batched_nms_rotated(const Tensor& boxes, const Tensor& scores, const Tensor& class_ids, double iou_threshold);

}  // namespace minidet
