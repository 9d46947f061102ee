// BalancedPositiveNegativeSampler: counts and fractions, short supply of positives or negatives, class labels,
// uniformity, reproducibility from a seed, batches, and CUDA against the CPU.
#include <string>
#include <vector>

#include "core/factories.h"
#include "models/sampler/sampler.h"
#include "ops/elementwise/compare.h"
#include "ops/indexing/where.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/cat.h"
#include "tests/support.h"

using namespace minidet;
using models::BalancedPositiveNegativeSampler;
using models::SampledMasks;

namespace {

// Labels: `positives` ones, `negatives` zeros and `ignored` minus ones, shuffled with a fixed seed.
Tensor make_labels(int64_t positives, int64_t negatives, int64_t ignored, uint64_t seed = 3) {
  std::vector<int64_t> values;
  values.insert(values.end(), positives, 1);
  values.insert(values.end(), negatives, 0);
  values.insert(values.end(), ignored, -1);
  Generator gen(seed);
  const std::vector<int64_t> perm = randperm(static_cast<int64_t>(values.size()), kInt64, &gen).to_vector<int64_t>();
  std::vector<int64_t> shuffled(values.size());
  for (size_t i = 0; i < values.size(); ++i) shuffled[i] = values[perm[i]];
  return from_vector<int64_t>(shuffled);
}

int64_t count(const Tensor& mask) { return sum(mask).item<int64_t>(); }

// Every sampled element has the right kind of label, and no element is both.
void check_consistent(const Tensor& labels, const SampledMasks& s) {
  CHECK(s.positive.dtype() == kBool);
  CHECK(s.positive.sizes() == labels.sizes());
  CHECK(s.negative.sizes() == labels.sizes());
  const std::vector<int64_t> l = labels.to_vector<int64_t>();
  const std::vector<bool> p = s.positive.to_vector<bool>(), n = s.negative.to_vector<bool>();
  for (size_t i = 0; i < l.size(); ++i) {
    if (p[i]) CHECK(l[i] >= 1);
    if (n[i]) CHECK(l[i] == 0);
  }
}

}  // namespace

TEST_CASE("values/sampler: counts with plenty and with short supply of positives or negatives") {
  struct Case {
    const char* what;
    int64_t positives, negatives, ignored, batch;
    double fraction;
    int64_t expected_positives, expected_negatives;
  };
  const Case cases[] = {
      {"plenty: the quota of positives and the rest negatives", 10, 100, 20, 32, 0.25, 8, 24},
      {"fewer positives than the quota: all taken and negatives fill up", 3, 100, 20, 32, 0.25, 3, 29},
      {"too few of both: everything there is", 5, 4, 7, 32, 0.5, 5, 4},
      {"fewer negatives than the rest: positives stay at the quota", 50, 6, 0, 32, 0.25, 8, 6},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    CAPTURE(std::string(c.what));
    const Tensor labels = make_labels(c.positives, c.negatives, c.ignored, seed);
    const BalancedPositiveNegativeSampler sampler(c.batch, c.fraction);
    Generator gen(seed++);
    const SampledMasks s = sampler(labels, &gen);
    check_consistent(labels, s);
    CHECK(count(s.positive) == c.expected_positives);
    CHECK(count(s.negative) == c.expected_negatives);
  }
  CHECK(BalancedPositiveNegativeSampler(32, 0.25).positive_quota() == 8);
}

TEST_CASE("values/sampler: fractions 0 and 1 and a quota that rounds down") {
  const Tensor labels = make_labels(20, 20, 0);
  Generator gen(4);
  const SampledMasks none = BalancedPositiveNegativeSampler(10, 0.0)(labels, &gen);
  CHECK(count(none.positive) == 0);
  CHECK(count(none.negative) == 10);
  const SampledMasks all = BalancedPositiveNegativeSampler(10, 1.0)(labels, &gen);
  CHECK(count(all.positive) == 10);
  CHECK(count(all.negative) == 0);
  const BalancedPositiveNegativeSampler odd(7, 0.5);  // floor(3.5) = 3
  CHECK(odd.positive_quota() == 3);
  const SampledMasks s = odd(labels, &gen);
  CHECK(count(s.positive) == 3);
  CHECK(count(s.negative) == 4);
}

TEST_CASE("values/sampler: class labels count as positives and ignored labels are never taken") {
  const Tensor labels = from_vector<int64_t>({3, 0, -1, 5, 0, -1, 1, 0});
  Generator gen(5);
  const SampledMasks s = BalancedPositiveNegativeSampler(100, 0.5)(labels, &gen);
  CHECK(s.positive.to_vector<bool>() == std::vector<bool>{true, false, false, true, false, false, true, false});
  CHECK(s.negative.to_vector<bool>() == std::vector<bool>{false, true, false, false, true, false, false, true});
}

TEST_CASE("values/sampler: every positive is equally likely to be picked") {
  // 10 positives, quota 5: each is picked with probability 1/2. Over 2000 draws the count of each is
  // Binomial(2000, 0.5): mean 1000, standard deviation about 22; 150 is almost 7 deviations.
  const Tensor labels = make_labels(10, 10, 0);
  const BalancedPositiveNegativeSampler sampler(10, 0.5);
  Generator gen(6);
  std::vector<int64_t> picked(20, 0), negatives_picked(20, 0);
  for (int draw = 0; draw < 2000; ++draw) {
    const SampledMasks s = sampler(labels, &gen);
    const std::vector<bool> p = s.positive.to_vector<bool>(), n = s.negative.to_vector<bool>();
    for (size_t i = 0; i < 20; ++i) {
      picked[i] += p[i];
      negatives_picked[i] += n[i];
    }
  }
  const std::vector<int64_t> l = labels.to_vector<int64_t>();
  for (size_t i = 0; i < 20; ++i) {
    CAPTURE(i);
    const int64_t times = l[i] == 1 ? picked[i] : negatives_picked[i];
    CHECK(times > 850);
    CHECK(times < 1150);
  }
}

TEST_CASE("values/sampler: the same seed gives the same sample and another seed another") {
  const Tensor labels = make_labels(40, 200, 30);
  const BalancedPositiveNegativeSampler sampler(64, 0.25);
  Generator a(77), b(77), c(78);
  const SampledMasks first = sampler(labels, &a), again = sampler(labels, &b), other = sampler(labels, &c);
  CHECK(first.positive.to_vector<bool>() == again.positive.to_vector<bool>());
  CHECK(first.negative.to_vector<bool>() == again.negative.to_vector<bool>());
  // 16 of 40 positives and 48 of 200 negatives: two seeds agreeing on both is practically impossible.
  CHECK(first.negative.to_vector<bool>() != other.negative.to_vector<bool>());
  CHECK(first.positive.to_vector<bool>() != other.positive.to_vector<bool>());
  // The default generator is used when none is given, and is reproducible through manual_seed.
  manual_seed(5);
  const SampledMasks d1 = sampler(labels);
  manual_seed(5);
  const SampledMasks d2 = sampler(labels);
  CHECK(d1.negative.to_vector<bool>() == d2.negative.to_vector<bool>());
}

TEST_CASE("values/sampler: a batch samples each row as consecutive single calls would") {
  const Tensor row0 = make_labels(12, 50, 5, 1), row1 = make_labels(2, 60, 5, 2);
  const BalancedPositiveNegativeSampler sampler(16, 0.5);
  Generator batched_gen(9), single_gen(9);
  const SampledMasks batched = sampler(stack({row0, row1}, 0), &batched_gen);
  const SampledMasks s0 = sampler(row0, &single_gen), s1 = sampler(row1, &single_gen);
  CHECK(batched.positive.sizes() == Shape{2, 67});
  CHECK(batched.positive.select(0, 0).to_vector<bool>() == s0.positive.to_vector<bool>());
  CHECK(batched.negative.select(0, 0).to_vector<bool>() == s0.negative.to_vector<bool>());
  CHECK(batched.positive.select(0, 1).to_vector<bool>() == s1.positive.to_vector<bool>());
  CHECK(batched.negative.select(0, 1).to_vector<bool>() == s1.negative.to_vector<bool>());
  CHECK(count(batched.positive.select(0, 0)) == 8);
  CHECK(count(batched.negative.select(0, 0)) == 8);
  CHECK(count(batched.positive.select(0, 1)) == 2);
  CHECK(count(batched.negative.select(0, 1)) == 14);
}

TEST_CASE("values/sampler: empty labels give empty masks") {
  const BalancedPositiveNegativeSampler sampler(16, 0.5);
  const SampledMasks s = sampler(zeros({0}, kInt64));
  CHECK(s.positive.sizes() == Shape{0});
  CHECK(s.negative.dtype() == kBool);
  CHECK(sampler(zeros({3, 0}, kInt64)).positive.sizes() == Shape{3, 0});
  // All ignored: nothing sampled.
  CHECK(count(sampler(full({10}, -1.0, kInt64)).negative) == 0);
}

TEST_CASE("errors/sampler: bad options and bad labels") {
  CHECK_THROWS_CONTAINING(BalancedPositiveNegativeSampler(0, 0.5), "batch_size_per_image must be positive");
  CHECK_THROWS_CONTAINING(BalancedPositiveNegativeSampler(8, 1.5), "positive_fraction must lie in [0, 1]");
  CHECK_THROWS_CONTAINING(BalancedPositiveNegativeSampler(8, -0.1), "positive_fraction must lie in [0, 1]");
  const BalancedPositiveNegativeSampler sampler(8, 0.5);
  CHECK_THROWS_CONTAINING(sampler(zeros({4})), "expected int64 labels");
  CHECK_THROWS_CONTAINING(sampler(zeros({2, 2, 2}, kInt64)), "expected labels of shape (N) or (B, N)");
  CHECK_THROWS_CONTAINING(sampler(Tensor()), "BalancedPositiveNegativeSampler");
}

MINIDET_CUDA_TEST_CASE("cuda/sampler: the same generator state gives the same masks as on the CPU") {
  // Several images of a few thousand anchors: the sort keys are distinct, so the radix sort on the GPU and
  // the CPU sort agree exactly and so must every mask bit.
  std::vector<Tensor> rows;
  for (int64_t r = 0; r < 4; ++r) rows.push_back(make_labels(5 + 40 * r, 2000 - 40 * r, 300, 20 + r));  // N = 2305
  const Tensor labels = stack(rows, 0);
  const BalancedPositiveNegativeSampler sampler(256, 0.5);
  Generator cpu_gen(31), gpu_gen(31);
  const SampledMasks on_cpu = sampler(labels, &cpu_gen);
  const SampledMasks on_gpu = sampler(labels.cuda(), &gpu_gen);
  CHECK(on_gpu.positive.is_cuda());
  CHECK(on_gpu.negative.is_cuda());
  CHECK(on_gpu.positive.to_vector<bool>() == on_cpu.positive.to_vector<bool>());
  CHECK(on_gpu.negative.to_vector<bool>() == on_cpu.negative.to_vector<bool>());
  CHECK(count(on_gpu.positive.select(0, 0)) == 5);
  CHECK(count(on_gpu.negative.select(0, 0)) == 251);
  CHECK(count(on_gpu.positive.select(0, 2)) == 85);  // all 85 < 128 positives, then negatives to 256
  CHECK(count(on_gpu.negative.select(0, 2)) == 171);
  CHECK(count(on_gpu.positive.select(0, 3)) == 125);
  CHECK(count(on_gpu.negative.select(0, 3)) == 131);
  // Both generators advanced identically: the next draws still agree.
  CHECK(sampler(labels.select(0, 1), &cpu_gen).negative.to_vector<bool>() ==
        sampler(labels.select(0, 1).cuda(), &gpu_gen).negative.to_vector<bool>());
}
