// Deterministic mode: ask every op for bit-identical results from run to run.
//
// Some CUDA backward passes scatter gradients with atomicAdd (index_select, gather, RoIAlign, deformable
// conv...). Floating-point addition is not associative, so the order in which threads land changes the
// last bits of the result from run to run. With deterministic mode on, such ops switch to an algorithm
// with a fixed summation order (a gather in which one thread owns each destination and adds its terms in
// a fixed order, the terms found by sorting them by destination or by walking the sources that can reach
// it), which is slower but reproducible. CPU kernels are deterministic either way.
#pragma once

namespace minidet {

struct DeterministicMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class DeterministicGuard {
 public:
  explicit DeterministicGuard(bool enabled = true) : previous_(DeterministicMode::is_enabled()) {
    DeterministicMode::set_enabled(enabled);
  }
  ~DeterministicGuard() { DeterministicMode::set_enabled(previous_); }
  DeterministicGuard(const DeterministicGuard&) = delete;
  DeterministicGuard& operator=(const DeterministicGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace minidet
