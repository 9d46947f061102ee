#include "models/sampler/sampler.h"

#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/shared_scalar.h"
#include "ops/indexing/where.h"
#include "ops/reduction/reduction.h"

namespace minidet::models {

namespace {

// rows random permutations of 0..n-1 (Fisher-Yates per row, as randperm), drawn in row order, as one
// (rows, n) int64 tensor on the host.
Tensor random_priorities(int64_t rows, int64_t n, Generator& generator) {
  std::vector<int64_t> values(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t* row = values.data() + r * n;
    std::iota(row, row + n, int64_t{0});
    for (int64_t i = n - 1; i > 0; --i) std::swap(row[i], row[generator.next_int(0, i + 1)]);
  }
  return from_vector<int64_t>(values, {rows, n});
}

}  // namespace

BalancedPositiveNegativeSampler::BalancedPositiveNegativeSampler(int64_t batch_size_per_image,
                                                                 double positive_fraction)
    : batch_size_per_image_(batch_size_per_image), positive_fraction_(positive_fraction) {
  MINIDET_CHECK(batch_size_per_image > 0,
                "BalancedPositiveNegativeSampler: batch_size_per_image must be positive, got ",
                batch_size_per_image);
  MINIDET_CHECK(positive_fraction >= 0.0 && positive_fraction <= 1.0,
                "BalancedPositiveNegativeSampler: positive_fraction must lie in [0, 1], got ", positive_fraction);
}

int64_t BalancedPositiveNegativeSampler::positive_quota() const {
  return static_cast<int64_t>(std::floor(static_cast<double>(batch_size_per_image_) * positive_fraction_));
}

SampledMasks BalancedPositiveNegativeSampler::operator()(const Tensor& labels, Generator* generator) const {
  const char* op = "BalancedPositiveNegativeSampler";
  ops::check_defined(op, labels, "labels");
  MINIDET_CHECK(labels.dtype() == kInt64, op, ": expected int64 labels (1 positive, 0 negative, -1 ignored), got ",
                labels.dtype());
  MINIDET_CHECK(labels.dim() == 1 || labels.dim() == 2, op, ": expected labels of shape (N) or (B, N), got ",
                labels.sizes());
  NoGradGuard no_grad;
  const Tensor positive = ge(labels, 1.0), negative = eq(labels, 0.0);
  if (labels.numel() == 0) return {positive, negative};  // already empty masks of the right shape

  const Tensor rows2d = labels.dim() == 1 ? labels.unsqueeze(0) : labels;
  const int64_t rows = rows2d.size(0), n = rows2d.size(1);
  Generator& g = generator ? *generator : default_generator();
  const Tensor priority = random_priorities(rows, n, g).to(labels.device());

  // group 0 positives, 1 negatives, 2 ignored; key = priority + n * group sorts by group, then randomly.
  const TensorOptions index_options(kInt64, labels.device());
  const Tensor pos = positive.reshape({rows, n}), neg = negative.reshape({rows, n});
  const Tensor group = where(pos, shared_scalar(0.0, index_options), where(neg, shared_scalar(1.0, index_options),
                                                                  shared_scalar(2.0, index_options)));
  const Tensor key = add(priority, mul(group, static_cast<double>(n)));
  const Tensor order = topk(key, n, -1, /*largest=*/false).indices;  // positions, positives first
  const Tensor rank = topk(order, n, -1, /*largest=*/false).indices;  // rank[i]: where i sits in order

  const int64_t quota = positive_quota();
  const Tensor num_positive = sum(pos, {-1}, /*keepdim=*/true);  // P per row, int64 (rows, 1)
  const Tensor quota_tensor = shared_scalar(static_cast<double>(quota), index_options);
  const Tensor taken_positive = where(lt(num_positive, quota_tensor), num_positive, quota_tensor);  // p
  // A negative at rank r is the (r - P)-th negative; it is taken while r - P < batch - p.
  const Tensor negative_limit = add(num_positive, sub(static_cast<double>(batch_size_per_image_), taken_positive));

  const Tensor positive_mask = logical_and(pos, lt(rank, static_cast<double>(quota)));
  const Tensor negative_mask = logical_and(neg, lt(rank, negative_limit));
  return {positive_mask.reshape(labels.sizes()), negative_mask.reshape(labels.sizes())};
}

}  // namespace minidet::models
