#include "models/matcher/matcher.h"

#include <cmath>

#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/shared_scalar.h"
#include "ops/indexing/where.h"
#include "ops/reduction/reduction.h"

namespace minidet::models {

Matcher::Matcher(double high_threshold, double low_threshold, bool allow_low_quality_matches)
    : high_threshold_(high_threshold),
      low_threshold_(low_threshold),
      allow_low_quality_matches_(allow_low_quality_matches) {
  MINIDET_CHECK(std::isfinite(high_threshold) && std::isfinite(low_threshold),
                "Matcher: thresholds must be finite, got high ", high_threshold, " and low ", low_threshold);
  MINIDET_CHECK(low_threshold <= high_threshold, "Matcher: expected low_threshold <= high_threshold, got low ",
                low_threshold, " and high ", high_threshold);
}

MatchResult Matcher::operator()(const Tensor& quality_in) const {
  ops::check_defined("Matcher", quality_in, "quality");
  ops::check_floating("Matcher", quality_in, "quality");
  MINIDET_CHECK(quality_in.dim() == 2 || quality_in.dim() == 3,
                "Matcher: expected a quality matrix of shape (M, N) or (B, M, N), got ", quality_in.sizes());
  NoGradGuard no_grad;  // labels and indices only: nothing to differentiate
  const Tensor quality = quality_in.detach();
  const TensorOptions index_options(kInt64, quality.device());

  // Shape of the results: Q's shape without the ground-truth dim (dim -2).
  Shape out_shape = quality.sizes();
  out_shape.erase(out_shape.end() - 2);
  const int64_t num_gt = quality.size(-2);
  if (num_gt == 0 || quality.numel() == 0)  // no object: all background (or no predictions: empty)
    return {zeros(out_shape, index_options), full(out_shape, static_cast<double>(kNegative), index_options)};

  // Each prediction's best ground truth (first on ties) and its quality.
  const ValuesIndices best = max(quality, -2);
  const Tensor positive = shared_scalar(static_cast<double>(kPositive), index_options);
  const Tensor negative = shared_scalar(static_cast<double>(kNegative), index_options);
  const Tensor ignored = shared_scalar(static_cast<double>(kIgnored), index_options);
  // The thresholds in Q's dtype, as PyTorch compares a float32 tensor with a Python float: a float32 IoU
  // equal to 0.7f counts as >= 0.7. ge, not lt, so that NaN (every comparison false) is background.
  const Tensor high = shared_scalar(high_threshold_, quality.options());
  const Tensor low = shared_scalar(low_threshold_, quality.options());
  Tensor labels = where(ge(best.values, high), positive, where(ge(best.values, low), ignored, negative));

  if (allow_low_quality_matches_) {
    // best_per_gt: (.., M, 1). A prediction ties with its ground truth's best when Q equals it exactly,
    // which is what torchvision's nonzero(Q == best[:, None]) selects; the best must be > 0 to count.
    const Tensor best_per_gt = max(quality, -1, /*keepdim=*/true).values;
    const Tensor is_best = eq(quality, best_per_gt);
    const Tensor best_overlaps = gt(best_per_gt, 0.0);
    const Tensor is_low_quality_match = where(best_overlaps, is_best, best_overlaps);  // logical and
    // Any ground truth choosing p: count the choices over dim -2 (bool sums in int64) and test > 0.
    const Tensor chosen = gt(sum(is_low_quality_match, {-2}), 0.0);
    labels = where(chosen, positive, labels);
  }
  return {best.indices, labels};
}

}  // namespace minidet::models
