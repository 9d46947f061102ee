// The random generator and the random factories: reproducibility, ranges, rough distributions, state
// save/restore, and golden values that pin the exact stream on every machine and compiler.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "tests/support.h"

using namespace minidet;

namespace {

// Mean and (population) standard deviation of a tensor's values.
std::pair<double, double> mean_std(const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  double sum = 0, sq = 0;
  for (double x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / static_cast<double>(v.size()))};
}

// xoshiro256** output is rotl(s1 * 5, 7) * 9. Inverting that picks the state word s1 that makes the next
// draw any 64-bit value we like, so a test can force the rare extreme draws.
uint64_t state_word_for_output(uint64_t output) {
  auto inverse = [](uint64_t a) {  // Newton's iteration for the inverse of an odd number mod 2^64
    uint64_t x = a;
    for (int i = 0; i < 6; ++i) x *= 2 - a * x;
    return x;
  };
  const uint64_t rotated = output * inverse(9);
  return ((rotated >> 7) | (rotated << 57)) * inverse(5);
}

}  // namespace

TEST_CASE("values/random: the same seed gives the same numbers and different seeds differ") {
  Generator a(123), b(123), c(124);
  const Tensor x = rand({1000}, kFloat64, &a);
  CHECK(x.to_vector<double>() == rand({1000}, kFloat64, &b).to_vector<double>());
  CHECK(x.to_vector<double>() != rand({1000}, kFloat64, &c).to_vector<double>());
  // A generator is a stream: the next call continues it instead of repeating it.
  CHECK(rand({1000}, kFloat64, &a).to_vector<double>() != x.to_vector<double>());

  // The default generator obeys manual_seed.
  manual_seed(7);
  const std::vector<double> first = randn({50}, kFloat64).to_vector<double>();
  manual_seed(7);
  CHECK(randn({50}, kFloat64).to_vector<double>() == first);
}

TEST_CASE("values/random: golden values pin the stream for a fixed seed") {
  // xoshiro256** seeded through splitmix64: integer arithmetic only, so these are exact everywhere. If this
  // test fails, every seeded experiment in the project stops being reproducible.
  Generator g(42);
  CHECK(g.next_u64() == 0x15780b2e0c2ec716ull);
  CHECK(g.next_u64() == 0x6104d9866d113a7eull);
  CHECK(g.next_u64() == 0xae17533239e499a1ull);
  // Uniforms are the top 53 bits scaled by 2^-53: exact too.
  g.manual_seed(42);
  CHECK(g.next_uniform() == 0.083862971059882163);
  CHECK(g.next_uniform() == 0.37898025066266861);
  CHECK(g.next_uniform() == 0.68004341102813937);
  // Normals go through log/sin/cos, which the C library may round differently in the last bit.
  g.manual_seed(42);
  CHECK(g.next_normal() == doctest::Approx(-0.30326306467873798).epsilon(1e-12));
  CHECK(g.next_normal() == doctest::Approx(0.28846173882942383).epsilon(1e-12));
  CHECK(g.next_normal() == doctest::Approx(1.3438117634372806).epsilon(1e-12));
  // The factories draw in row-major order from the same stream.
  Generator r(42);
  CHECK(rand({3}, kFloat32, &r).to_vector<float>() ==
        std::vector<float>{0.083862971059882163f, 0.37898025066266861f, 0.68004341102813937f});
  Generator i(42);
  CHECK(randint(0, 100, {5}, kInt64, &i).to_vector<int64_t>() == std::vector<int64_t>{42, 2, 9, 93, 76});
  Generator p(42);
  CHECK(randperm(6, kInt64, &p).to_vector<int64_t>() == std::vector<int64_t>{3, 5, 4, 1, 2, 0});
}

TEST_CASE("values/random: rand lies in 0 to 1 with 1 excluded and has mean 1/2") {
  Generator g(1);
  const std::vector<double> v = rand({100000}, kFloat64, &g).to_vector<double>();
  CHECK(*std::min_element(v.begin(), v.end()) >= 0.0);
  CHECK(*std::max_element(v.begin(), v.end()) < 1.0);
  // Standard error of the mean is 0.29/sqrt(1e5) ~ 0.001; 0.01 is ten of them.
  Generator h(1);
  const auto [mean, sd] = mean_std(rand({100000}, kFloat64, &h));
  CHECK(mean == doctest::Approx(0.5).epsilon(0.02));
  CHECK(sd == doctest::Approx(std::sqrt(1.0 / 12)).epsilon(0.02));
}

TEST_CASE("values/random: float32 rand never returns 1.0") {
  // The largest double draw, 1 - 2^-53, rounds to 1.0f when converted to float32. Force that draw.
  Generator g;
  const std::vector<uint64_t> state = {1, state_word_for_output(~0ull), 2, 3, 0, 0};
  g.set_state(state);
  REQUIRE(g.next_uniform() == 1.0 - 0x1.0p-53);  // the crafted state really gives the extreme draw
  g.set_state(state);
  const float f = rand({1}, kFloat32, &g).item<float>();
  CHECK(f < 1.0f);
  CHECK(f == 0x1.fffffep-1f);  // the largest float below 1
  g.set_state(state);
  CHECK(rand({1}, kFloat64, &g).item() == 1.0 - 0x1.0p-53);  // float64 keeps the exact draw
}

TEST_CASE("values/random: randn has mean 0 and standard deviation 1") {
  Generator g(2);
  const auto [mean, sd] = mean_std(randn({100000}, kFloat64, &g));
  CHECK(std::fabs(mean) < 0.02);  // standard error ~ 0.003
  CHECK(std::fabs(sd - 1.0) < 0.02);
  // Box-Muller makes normals in pairs; an odd-sized draw keeps the spare for the next call, so two calls
  // give the same numbers as one call of the combined size.
  Generator a(3), b(3);
  std::vector<double> split = randn({3}, kFloat64, &a).to_vector<double>();
  const std::vector<double> rest = randn({4}, kFloat64, &a).to_vector<double>();
  split.insert(split.end(), rest.begin(), rest.end());
  CHECK(split == randn({7}, kFloat64, &b).to_vector<double>());
}

TEST_CASE("values/random: randint stays within low to high-exclusive and reaches every value") {
  Generator g(4);
  const std::vector<int64_t> v = randint(-3, 4, {10000}, kInt64, &g).to_vector<int64_t>();
  std::vector<int> counts(7, 0);
  for (int64_t x : v) {
    REQUIRE(x >= -3);
    REQUIRE(x < 4);  // high is exclusive
    counts[x + 3]++;
  }
  // Each of 7 values is expected ~1429 times; a fair generator never gets near these bounds.
  for (int c : counts) CHECK((c > 1200 && c < 1650));
  Generator h(4);
  CHECK(randint(5, 6, {4}, kInt64, &h).to_vector<int64_t>() == std::vector<int64_t>(4, 5));  // one choice
}

TEST_CASE("values/random: randperm is a permutation") {
  Generator g(5);
  std::vector<int64_t> p = randperm(1000, kInt64, &g).to_vector<int64_t>();
  std::vector<int64_t> identity(1000);
  for (int64_t i = 0; i < 1000; ++i) identity[i] = i;
  CHECK(p != identity);  // shuffled (the chance of the identity is 1/1000!)
  std::sort(p.begin(), p.end());
  CHECK(p == identity);  // every index exactly once
  CHECK(randperm(0).numel() == 0);
}

TEST_CASE("values/random: Generator state and set_state resume the identical sequence") {
  Generator g(6);
  (void)g.next_normal();  // leaves a spare normal pending: the state must include it
  const std::vector<uint64_t> saved = g.state();
  CHECK(saved.size() == 6);
  const std::vector<double> expected = randn({5}, kFloat64, &g).to_vector<double>();
  const double expected_u = g.next_uniform();

  Generator other(999);  // a generator with a different history continues identically once restored
  other.set_state(saved);
  CHECK(randn({5}, kFloat64, &other).to_vector<double>() == expected);
  CHECK(other.next_uniform() == expected_u);

  // manual_seed drops a pending spare normal, so reseeding fully restarts the stream.
  Generator a(8), b(8);
  (void)a.next_normal();
  a.manual_seed(8);
  CHECK(a.next_normal() == b.next_normal());
}

TEST_CASE("values/random: randint is exact for ranges beyond 2^53") {
  Generator g(3);
  const int64_t low = int64_t(1) << 60;
  const std::vector<int64_t> v = randint(low, low + 3, {64}, kInt64, &g).to_vector<int64_t>();
  for (int64_t x : v) CHECK((x >= low && x < low + 3));
  CHECK(std::count(v.begin(), v.end(), low + 1) > 0);  // odd values survive: nothing went through double
  CHECK_THROWS_CONTAINING(randint(3, 3, {0}), "empty range");
}

TEST_CASE("values/random: next_int draws exactly what plain rejection sampling draws, rejections included") {
  // The reference: draw while x >= UINT64_MAX - UINT64_MAX % range, then low + x % range. next_int skips
  // computing that limit when x is safely below it; the numbers and the generator's state must not change.
  // Ranges near 2^63 and 2^64 reject about half of their draws, so both branches run many times.
  const auto reference = [](Generator& g, int64_t low, int64_t high) {
    const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
    const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t x;
    do x = g.next_u64();
    while (x >= limit);
    return static_cast<int64_t>(static_cast<uint64_t>(low) + x % range);
  };
  const int64_t big = INT64_MAX;
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 1},
                                                           {0, 2},
                                                           {0, 7},
                                                           {-5, 5},
                                                           {0, 18432},
                                                           {0, int64_t(1) << 32},
                                                           {0, (int64_t(1) << 62) + 1},
                                                           {-big, 1},
                                                           {-big - 1, big},
                                                           {-big - 1, 0},
                                                           {0, big}};
  Generator fast(11), plain(11);
  for (int round = 0; round < 2000; ++round)
    for (const auto& [low, high] : ranges) {
      CAPTURE(low);
      CAPTURE(high);
      REQUIRE(fast.next_int(low, high) == reference(plain, low, high));
    }
  CHECK(fast.state() == plain.state());
}
