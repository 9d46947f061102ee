// A seeded random generator that gives the same numbers on every machine and compiler.
//
// std::mt19937 is portable but std::uniform_real_distribution / std::normal_distribution are not (their
// algorithms are implementation-defined), so minidet owns the whole path: xoshiro256** for 64-bit words
// (seeded through splitmix64, as its authors recommend), the top 53 bits for a uniform double, and the
// Box-Muller transform for normals. Tensors are filled on the host in row-major order and then copied, so
// rand on CUDA equals rand on CPU for the same seed.
#pragma once

#include <cstdint>
#include <vector>

namespace minidet {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x6d696e69646574ull /* "minidet" */);
  void manual_seed(uint64_t seed);

  uint64_t next_u64();
  double next_uniform();  // in [0, 1)
  double next_normal();   // standard normal
  int64_t next_int(int64_t low, int64_t high);  // uniform in [low, high), unbiased

  // Everything needed to continue the exact same sequence (for checkpoints).
  std::vector<uint64_t> state() const;
  void set_state(const std::vector<uint64_t>& state);

 private:
  uint64_t s_[4];
  bool has_spare_normal_ = false;  // Box-Muller makes normals in pairs; the second waits here
  double spare_normal_ = 0.0;
};

// splitmix64 of x: a well-spread 64-bit value, so neighbouring inputs give unrelated seeds. Derive a child
// seed for stream k of a seed as mix_seed(mix_seed(seed) ^ k) (datasets, loaders, per-image streams).
uint64_t mix_seed(uint64_t x);

// The process-wide generator used when a factory is given none.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace minidet
