// BalancedPositiveNegativeSampler: pick a fixed-size training sample of predictions per image, with at most
// a given fraction of positives (Faster R-CNN: 256 anchors at 0.5 for the RPN, 512 or 128 RoIs at 0.25 for
// the box head), so the many easy background predictions do not swamp the few objects.
//
// Input: labels of shape (N) for one image or (B, N) for B images, int64, as the Matcher (or the RoI heads'
// class assignment) writes them:  >= 1 positive (a class, or 1),  0 negative,  < 0 ignored (never sampled).
// Per image (row), with P positives and Q negatives available:
//
//   positive quota   q+ = floor(batch_size_per_image * positive_fraction)
//   positives taken  p  = min(P, q+)                        uniformly at random among the P
//   negatives taken  n  = min(Q, batch_size_per_image - p)  uniformly at random among the Q
//
// so an image short of positives is filled up with negatives, as in torchvision and detectron2.
//
// How it stays on the device, without a shape that depends on the data: the result is two bool masks of
// the labels' shape (positive, negative) instead of index lists. Every prediction gets a random priority (a
// random permutation of 0..N-1 per row, drawn on the host from a minidet::Generator and copied over once),
// and a sort key  key = priority + N * group  with group 0 for positives, 1 for negatives, 2 for ignored.
// Sorting the keys (topk with k = N, ascending) lists the positives first in random order, then the
// negatives in random order; sorting the resulting order once more gives each prediction its rank r in that
// list (the inverse permutation). Then
//
//   positive mask = positive and r < q+                 (the q+ positives that came first)
//   negative mask = negative and r - P < batch - p      (the first batch - p negatives)
//
// with P and p computed per row on the device. Taking the first k of a uniformly random order is sampling k
// without replacement, uniformly. Keys are distinct integers, so CPU and CUDA sort them the same way: the
// same generator state gives the same masks on both devices, and the same seed gives the same run.
//
// Cost: two sorts of N keys per row (CUB's segmented radix sort on CUDA), B*N random draws on the host and
// one host-to-device copy of the priorities. No device-to-host synchronisation.
// Nothing is differentiable here (masks only).
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace minidet::models {

struct SampledMasks {
  Tensor positive;  // bool, the labels' shape: sampled positives
  Tensor negative;  // bool, the labels' shape: sampled negatives
};

class BalancedPositiveNegativeSampler {
 public:
  // batch_size_per_image > 0, positive_fraction in [0, 1].
  BalancedPositiveNegativeSampler(int64_t batch_size_per_image, double positive_fraction);

  // labels: int64 (N) or (B, N) on any device; the masks come back on the same device. generator: where the
  // random priorities come from (the default generator when null).
  SampledMasks operator()(const Tensor& labels, Generator* generator = nullptr) const;

  int64_t batch_size_per_image() const { return batch_size_per_image_; }
  double positive_fraction() const { return positive_fraction_; }
  int64_t positive_quota() const;  // floor(batch_size_per_image * positive_fraction)

 private:
  int64_t batch_size_per_image_;
  double positive_fraction_;
};

}  // namespace minidet::models
