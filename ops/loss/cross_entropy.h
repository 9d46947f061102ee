// cross_entropy: softmax cross-entropy between logits and class indices, with PyTorch's semantics.
//
// For sample i with logits z (C classes), target t = target[i] and class weights w (all 1 when not given),
// let lse = log sum_c exp(z_c) (computed stably, subtracting max_c z_c first) and eps = label_smoothing:
//
//   loss_i = (1 - eps) * w_t * (lse - z_t)  +  (eps / C) * sum_c w_c * (lse - z_c)
//
// i.e. the negative log-likelihood of the target, mixed with that of the uniform distribution. A sample
// whose target is ignore_index has loss 0 and weight 0. Reduction:
//   none  loss (N)      sum  sum_i loss_i      mean  sum_i loss_i / sum_{i not ignored} w_{t_i}
// so with weights, mean divides by the total weight of the counted targets (not by N). When every target
// is ignored, mean is 0 / 0 = NaN, as in PyTorch.
//
// Backward, with p = softmax(z) and g_i the upstream gradient of loss_i (g / total weight for mean):
//   dz_c = g_i * ( p_c * ((1 - eps) w_t + (eps / C) sum_c' w_c')  -  (1 - eps) w_t [c == t]  -  (eps / C) w_c )
// which is g_i * (p_c - [c == t]) without weights or smoothing; 0 for ignored samples. The backward saves
// the logits and each row's lse, so it recomputes p without a second max/sum pass.
//
// Conventions: logits (N, C) float32/float64; target (N) int64 on the same device; weight (C) of the
// logits' dtype and device, treated as a constant (no gradient flows into it). A target outside [0, C)
// that is not ignore_index is an error. Checking that reads the targets on the host, which on CUDA costs a
// device-to-host copy and so a synchronisation per call: the price of never reading out of bounds.
#pragma once

#include "core/tensor.h"
#include "ops/loss/reduction.h"

namespace minidet {

struct CrossEntropyOptions {
  Tensor weight;               // (C), optional: undefined means all ones
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;  // in [0, 1]
};

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options = {});

}  // namespace minidet
