// encode_boxes / decode_boxes: the R-CNN box parameterisation (models/box_coder/box_coder.h has the math)
// in one kernel each, for the tensors no gradient flows through: the regression targets, and the decoded
// proposals the detector detaches.
//
//   encode_boxes(G (..., 4), P (..., 4), weights)          -> (..., 4)    dx, dy, dw, dh per box pair
//   decode_boxes(d (N, 4K), P (N, 4), weights, clip)       -> (N, 4K)     K boxes per reference box
//
// Why: written as tensor ops, encode is a long chain of small elementwise kernels (centres, sizes, the four
// deltas, a stack) and decode another. A training step encodes twice (anchors, sampled RoIs) and decodes once
// (proposals); one thread per box does the same arithmetic in one pass.
//
// Same numbers as the composed form: the same operations in the same order, each exactly rounded (never
// fused into an FMA: ops/boxes/box_math.h), and exp and log from the elementwise ops' own formulas. So a
// BoxCoder call gives identical bits whichever form runs, on the CPU and on CUDA (up to the device's exp
// and log, which the composed CUDA form shares).
//
// Not differentiable: with grad mode on and an input that requires grad, they refuse (BoxCoder then uses
// its composed, differentiable form). float32 and float64, CPU and CUDA; inputs may be non-contiguous; empty
// inputs give empty outputs. Like BoxCoder, they do not check that widths and heights are positive.
#pragma once

#include <array>

#include "core/tensor.h"

namespace minidet {

// weights = (wx, wy, ww, wh), each finite and positive.
Tensor encode_boxes(const Tensor& target_boxes, const Tensor& reference_boxes, const std::array<double, 4>& weights);
// clip: the largest dw / ww (and dh / wh) before exp; not NaN.
Tensor decode_boxes(const Tensor& deltas, const Tensor& reference_boxes, const std::array<double, 4>& weights,
                    double clip);

// The argument checks of encode_boxes and decode_boxes, public so that the differentiable BoxCoder
// (models/box_coder) refuses exactly what these refuse (errors name `op`): boxes of shape (..., 4) alike
// (encode); deltas (N, 4K) against reference boxes (N, 4) (decode); one dtype and device; finite positive
// weights.
void check_encode_args(const char* op, const Tensor& target_boxes, const Tensor& reference_boxes);
void check_decode_args(const char* op, const Tensor& deltas, const Tensor& reference_boxes);
void check_box_coding_weights(const char* op, const std::array<double, 4>& weights);

}  // namespace minidet
