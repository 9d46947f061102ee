// Matcher: assign every prediction (anchor or proposal) to its best ground truth, and label it.
//
// Input: a match-quality matrix Q of shape (M, N), or (B, M, N) for B images at once: Q[g][p] says how
// well prediction p fits ground truth g (usually IoU). Output, per prediction p:
//
//   matches[p] = argmax_g Q[g][p]                     (int64; the first g on ties)
//   labels[p]  =  1   if max_g Q[g][p] >= high_threshold              (foreground)
//                -1   if low_threshold <= max_g Q[g][p] < high_threshold   (ignored: neither)
//                 0   if max_g Q[g][p] < low_threshold                 (background)
//
// So a quality exactly at high_threshold is positive and one exactly at low_threshold is ignored, the same
// boundaries as torchvision's and detectron2's Matcher (q < low: negative, low <= q < high: ignored).
// The thresholds are first rounded to Q's dtype, as PyTorch does when it compares a float32 tensor with a
// Python float (so a float32 quality of 0.7f is >= a threshold of 0.7).
//
// allow_low_quality_matches (Faster R-CNN's RPN rule): every ground truth g also makes positive the
// predictions that fit it best, best_g = max_p Q[g][p], all of them when several tie, even when best_g is
// below high_threshold; so that no object is left without a positive anchor. As in torchvision and
// detectron2, such a prediction keeps matches[p] = its own argmax (which may be another ground truth that
// overlaps it more), only its label changes. One deliberate difference: a ground truth whose best quality
// is not positive (best_g <= 0: it overlaps no prediction at all) adds nothing. In torchvision every
// prediction would then tie at 0 and become positive; here that cannot happen.
//
// Conventions and edge cases:
// - M = 0 (an image without objects): every label is 0 (background) and every match is 0. Callers that
//   gather matched boxes must not read them in that case (there is nothing to read).
// - N = 0: empty results of shape (0) / (B, 0).
// - Padding: a batch of images with different object counts can pad Q with rows of a negative value
//   (e.g. -1). Such rows never win against a real overlap >= 0, never make a low-quality match, and an
//   image whose rows are all padding labels everything background (given low_threshold >= 0).
// - NaN qualities compare false everywhere, so a NaN column is labelled background.
// - Everything runs on Q's device with existing ops (max along a dim, comparisons, where, sum): no
//   device-to-host synchronisation, and no shape depends on the data.
//
// Nothing here is differentiable (labels and indices only); Q may require grad, it is read detached.
#pragma once

#include "core/tensor.h"

namespace minidet::models {

struct MatchResult {
  Tensor matches;  // int64, Q's shape without the ground-truth dim: (N) or (B, N)
  Tensor labels;   // int64, same shape: 1 foreground, 0 background, -1 ignored
};

class Matcher {
 public:
  static constexpr int64_t kPositive = 1;
  static constexpr int64_t kNegative = 0;
  static constexpr int64_t kIgnored = -1;

  // Requires finite low_threshold <= high_threshold (equal thresholds mean no ignored band).
  Matcher(double high_threshold, double low_threshold, bool allow_low_quality_matches);

  MatchResult operator()(const Tensor& quality) const;

  double high_threshold() const { return high_threshold_; }
  double low_threshold() const { return low_threshold_; }
  bool allow_low_quality_matches() const { return allow_low_quality_matches_; }

 private:
  double high_threshold_;
  double low_threshold_;
  bool allow_low_quality_matches_;
};

}  // namespace minidet::models
