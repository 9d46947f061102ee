#include "core/generator.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace minidet {
namespace {

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

constexpr double kTwoPi = 6.283185307179586476925286766559;

}  // namespace

uint64_t mix_seed(uint64_t x) {
  uint64_t z = x + kGoldenGamma;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Generator::Generator(uint64_t seed) { manual_seed(seed); }

void Generator::manual_seed(uint64_t seed) {
  // The splitmix64 sequence seed+g, seed+2g, ... fills the state, as xoshiro's authors recommend.
  for (uint64_t& word : s_) {
    word = mix_seed(seed);
    seed += kGoldenGamma;
  }
  has_spare_normal_ = false;
}

uint64_t Generator::next_u64() {  // xoshiro256** 1.0
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Generator::next_uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::next_normal() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  // 1 - u lies in (0, 1], so the log is finite.
  const double radius = std::sqrt(-2.0 * std::log(1.0 - next_uniform()));
  const double angle = kTwoPi * next_uniform();
  spare_normal_ = radius * std::sin(angle);
  has_spare_normal_ = true;
  return radius * std::cos(angle);
}

int64_t Generator::next_int(int64_t low, int64_t high) {
  MINIDET_CHECK(low < high, "Generator::next_int: empty range [", low, ", ", high, ")");
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);  // no signed overflow
  // Rejection sampling: drop the top partial copy of [0, range) so every value is equally likely, i.e. draw
  // again while x >= limit = UINT64_MAX - UINT64_MAX % range. Since limit > UINT64_MAX - range, any x at or
  // below that is kept without computing limit: the exact same draws, with one 64-bit division per number
  // instead of two (a random permutation of a detector's anchors takes tens of thousands of them a step).
  uint64_t x = next_u64();
  if (x > UINT64_MAX - range) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    while (x >= limit) x = next_u64();
  }
  return static_cast<int64_t>(static_cast<uint64_t>(low) + x % range);
}

std::vector<uint64_t> Generator::state() const {
  uint64_t spare_bits;
  std::memcpy(&spare_bits, &spare_normal_, sizeof(double));
  return {s_[0], s_[1], s_[2], s_[3], has_spare_normal_ ? 1u : 0u, spare_bits};
}

void Generator::set_state(const std::vector<uint64_t>& state) {
  MINIDET_CHECK(state.size() == 6, "Generator::set_state: expected 6 words, got ", state.size());
  for (int i = 0; i < 4; ++i) s_[i] = state[i];
  has_spare_normal_ = state[4] != 0;
  std::memcpy(&spare_normal_, &state[5], sizeof(double));
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace minidet
