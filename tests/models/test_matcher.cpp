// Matcher: hand-computed labels at and around both thresholds, ties, low-quality matches, no ground truth,
// padding rows, batches, and CUDA against the CPU.
#include <cmath>
#include <vector>

#include "core/factories.h"
#include "models/matcher/matcher.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/cat.h"
#include "tests/support.h"

using namespace minidet;
using models::MatchResult;
using models::Matcher;

namespace {

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// 4 ground truths x 5 predictions, float64 (so 0.3 and 0.7 are the same doubles as the thresholds).
//   p0: best 0.8 (gt0)            >= high: positive
//   p1: best 0.6 (gt0)            ignored; the only best of gt2 (0.5): positive with low-quality matches
//   p2: best 0.45, gt1 (tie with p4 for gt1's best)
//   p3: all 0: background, argmax the first gt; gt3 overlaps nothing and must not make it positive
//   p4: best 0.45 (gt1)
Tensor quality_matrix() {
  return from_vector<double>({0.8, 0.6, 0.1, 0.0, 0.2,     //
                              0.3, 0.2, 0.45, 0.0, 0.45,   //
                              0.0, 0.5, 0.0, 0.0, 0.0,     //
                              0.0, 0.0, 0.0, 0.0, 0.0},
                             {4, 5});
}

}  // namespace

TEST_CASE("values/matcher: labels and matches without low-quality matches") {
  const MatchResult r = Matcher(0.7, 0.3, false)(quality_matrix());
  CHECK(r.matches.dtype() == kInt64);
  CHECK(r.labels.dtype() == kInt64);
  CHECK(ints(r.matches) == std::vector<int64_t>{0, 0, 1, 0, 1});
  CHECK(ints(r.labels) == std::vector<int64_t>{1, -1, -1, 0, -1});
}

TEST_CASE("values/matcher: low-quality matches take every tie of each ground truth's best") {
  const MatchResult r = Matcher(0.7, 0.3, true)(quality_matrix());
  // gt0 -> p0 (already positive), gt1 -> p2 and p4 (tied at 0.45), gt2 -> p1 (whose own argmax stays gt0),
  // gt3 overlaps nothing -> no change (p3 stays background).
  CHECK(ints(r.matches) == std::vector<int64_t>{0, 0, 1, 0, 1});
  CHECK(ints(r.labels) == std::vector<int64_t>{1, 1, 1, 0, 1});
}

TEST_CASE("values/matcher: a quality exactly at high is positive and exactly at low is ignored") {
  // One ground truth; predictions just below, at and just above each threshold (0.25 and 0.75 are exact
  // in binary, and so is every value here).
  const Tensor q = from_vector<double>({0.2499999, 0.25, 0.2500001, 0.7499999, 0.75, 0.7500001}, {1, 6});
  const MatchResult r = Matcher(0.75, 0.25, false)(q);
  CHECK(ints(r.labels) == std::vector<int64_t>{0, -1, -1, -1, 1, 1});
  CHECK(ints(r.matches) == std::vector<int64_t>{0, 0, 0, 0, 0, 0});
  // Equal thresholds: no ignored band, q >= t positive, q < t negative.
  CHECK(ints(Matcher(0.5, 0.5, false)(from_vector<double>({0.49, 0.5, 0.51}, {1, 3})).labels) ==
        std::vector<int64_t>{0, 1, 1});
}

TEST_CASE("values/matcher: float32 qualities compare with the thresholds rounded to float32") {
  // 0.7f is below the double 0.7, but PyTorch (and so torchvision) compares a float32 tensor with 0.7f.
  const Tensor q = from_vector<float>({0.7f, 0.3f, 0.29f}, {1, 3});
  CHECK(ints(Matcher(0.7, 0.3, false)(q).labels) == std::vector<int64_t>{1, -1, 0});
}

TEST_CASE("values/matcher: ties in a prediction's column pick the first ground truth") {
  const Tensor q = from_vector<double>({0.2, 0.9, 0.5,  //
                                        0.2, 0.9, 0.6,  //
                                        0.1, 0.9, 0.6},
                                       {3, 3});
  const MatchResult r = Matcher(0.7, 0.3, false)(q);
  CHECK(ints(r.matches) == std::vector<int64_t>{0, 0, 1});
  CHECK(ints(r.labels) == std::vector<int64_t>{0, 1, -1});
}

TEST_CASE("values/matcher: no ground truth labels everything background") {
  for (bool low_quality : {false, true}) {
    const MatchResult r = Matcher(0.7, 0.3, low_quality)(zeros({0, 4}));
    CHECK(r.labels.sizes() == Shape{4});
    CHECK(ints(r.labels) == std::vector<int64_t>{0, 0, 0, 0});
    CHECK(ints(r.matches) == std::vector<int64_t>{0, 0, 0, 0});
    const MatchResult batched = Matcher(0.7, 0.3, low_quality)(zeros({2, 0, 3}));
    CHECK(batched.labels.sizes() == Shape{2, 3});
    CHECK(ints(batched.labels) == std::vector<int64_t>(6, 0));
  }
}

TEST_CASE("values/matcher: no predictions gives empty results") {
  const MatchResult r = Matcher(0.7, 0.3, true)(zeros({3, 0}));
  CHECK(r.matches.sizes() == Shape{0});
  CHECK(r.labels.sizes() == Shape{0});
  CHECK(r.labels.dtype() == kInt64);
}

TEST_CASE("values/matcher: padding rows of -1 never match") {
  // Real gt0 and a padding row; a fully padded image is all background, even with low-quality matches.
  const Tensor q = from_vector<double>({0.8, 0.0, 0.4,  //
                                        -1, -1, -1},
                                       {2, 3});
  const MatchResult r = Matcher(0.7, 0.3, true)(q);
  CHECK(ints(r.matches) == std::vector<int64_t>{0, 0, 0});
  CHECK(ints(r.labels) == std::vector<int64_t>{1, 0, -1});
  const MatchResult padded = Matcher(0.7, 0.3, true)(full({2, 3}, -1.0, kFloat64));
  CHECK(ints(padded.labels) == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("values/matcher: a batch matches every image as if alone") {
  const Tensor a = quality_matrix();
  const Tensor b = from_vector<double>({0.1, 0.9, 0.3, 0.35, 0.0,  //
                                        0.75, 0.2, 0.1, 0.0, 0.0,  //
                                        0.0, 0.0, 0.0, 0.5, 0.05,  //
                                        -1, -1, -1, -1, -1},
                                       {4, 5});
  const Tensor batch = stack({a, b}, 0);
  const Matcher matcher(0.7, 0.3, true);
  const MatchResult r = matcher(batch);
  CHECK(r.labels.sizes() == Shape{2, 5});
  std::vector<int64_t> labels = ints(matcher(a).labels), matches = ints(matcher(a).matches);
  for (int64_t v : ints(matcher(b).labels)) labels.push_back(v);
  for (int64_t v : ints(matcher(b).matches)) matches.push_back(v);
  CHECK(ints(r.labels) == labels);
  CHECK(ints(r.matches) == matches);
  // Image b by hand: p0 0.75 gt1 -> 1; p1 0.9 -> 1; p2 0.3 -> -1; p3 0.5 gt2 -> -1, but gt2's best -> 1;
  // p4 0.05 -> 0.
  CHECK(ints(matcher(b).labels) == std::vector<int64_t>{1, 1, -1, 1, 0});
  CHECK(ints(matcher(b).matches) == std::vector<int64_t>{1, 0, 0, 2, 2});
}

TEST_CASE("values/matcher: a quality matrix that requires grad is read without recording") {
  const Tensor q = quality_matrix().requires_grad_();
  const MatchResult r = Matcher(0.7, 0.3, true)(q);
  CHECK_FALSE(r.labels.requires_grad());
  CHECK(ints(r.labels) == std::vector<int64_t>{1, 1, 1, 0, 1});
}

TEST_CASE("errors/matcher: bad thresholds and bad quality matrices") {
  CHECK_THROWS_CONTAINING(Matcher(0.3, 0.7, false), "low_threshold <= high_threshold");
  CHECK_THROWS_CONTAINING(Matcher(std::nan(""), 0.3, false), "thresholds must be finite");
  const Matcher matcher(0.7, 0.3, true);
  CHECK_THROWS_CONTAINING(matcher(zeros({5})), "expected a quality matrix of shape (M, N) or (B, M, N)");
  CHECK_THROWS_CONTAINING(matcher(zeros({1, 2, 3, 4})), "expected a quality matrix");
  CHECK_THROWS_CONTAINING(matcher(zeros({2, 3}, kInt64)), "Matcher");
  CHECK_THROWS_CONTAINING(matcher(Tensor()), "Matcher");
}

MINIDET_CUDA_TEST_CASE("cuda/matcher: labels and matches equal the CPU ones with ties and thresholds hit") {
  // Qualities on a 0.1 grid, so many columns and rows tie and many values sit exactly on the thresholds
  // (compared in float32 on both devices); one padding row per image.
  Generator gen(11);
  const Tensor grid = randint(0, 11, {3, 7, 300}, kInt64, &gen).to(kFloat32);
  Tensor q = div(grid, 10.0);  // exact float32 tenths, as the thresholds rounded to float32
  q.select(1, 6).fill_(-1.0);
  for (bool low_quality : {false, true}) {
    CAPTURE(low_quality);
    const Matcher matcher(0.7, 0.3, low_quality);
    const MatchResult on_cpu = matcher(q), on_gpu = matcher(q.cuda());
    CHECK(on_gpu.labels.is_cuda());
    CHECK(on_gpu.matches.is_cuda());
    CHECK(ints(on_gpu.labels) == ints(on_cpu.labels));
    CHECK(ints(on_gpu.matches) == ints(on_cpu.matches));
    const MatchResult empty_gpu = matcher(zeros({0, 9}, Device::cuda()));
    CHECK(empty_gpu.labels.is_cuda());
    CHECK(ints(empty_gpu.labels) == std::vector<int64_t>(9, 0));
  }
}
