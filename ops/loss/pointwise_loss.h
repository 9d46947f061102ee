// Pointwise losses: one loss value per element of (input, target), then a reduction (ops/loss/reduction.h).
//
// binary_cross_entropy_with_logits, with x the logit, t the target in [0, 1], p the pos_weight (1 if not
// given) and softplus(u) = log(1 + e^u):
//   loss = max(x, 0) - x t + log(1 + e^-|x|)  +  (p - 1) t softplus(-x)
//   The first three terms are -(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))) in a form that never
//   overflows: e^-|x| <= 1. The last term weighs the positive part by p; it vanishes when p = 1.
//   dloss/dx = sigmoid(x) - t + (p - 1) t (sigmoid(x) - 1)
//   dloss/dt = -x + (p - 1) softplus(-x)
// smooth_l1_loss (Fast R-CNN's box loss, Girshick 2015), with d = input - target:
//   loss = 0.5 d^2 / beta   if |d| < beta,   |d| - 0.5 beta   otherwise
//   dloss/dinput = d / beta  or  sign(d);  dloss/dtarget = -dloss/dinput
//   beta = 0 is exactly l1_loss (the quadratic piece is empty).
// l1_loss:
//   loss = |d|,  dloss/dinput = sign(d) (0 at d = 0, as in PyTorch),  dloss/dtarget = -sign(d)
//
// Then, elementwise, loss *= weight when a weight is given, and the reduction: none (input's shape),
// mean (sum / number of elements; NaN for an empty input), sum.
//
// Conventions: input and target have the same shape, dtype (float32/float64) and device. Gradients flow to
// input and target. weight must broadcast to the input's shape and pos_weight too (typically (C) against
// (N, C): one weight per class); both are constants of the loss (no gradient), as in PyTorch.
#pragma once

#include "core/tensor.h"
#include "ops/loss/reduction.h"

namespace minidet {

struct BceWithLogitsOptions {
  Tensor weight;      // optional, broadcast to the input's shape
  Tensor pos_weight;  // optional, broadcast to the input's shape
  Reduction reduction = Reduction::Mean;
};

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        const BceWithLogitsOptions& options = {});
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, double beta = 1.0,
                      Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace minidet
