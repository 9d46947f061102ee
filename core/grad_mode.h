// Grad mode: a thread-local switch that says whether ops record the autograd graph.
//
// It lives in core (like PyTorch's c10::GradMode) because core's own functions consult it: the raw,
// non-recording Tensor methods refuse to touch a tensor that requires grad while recording is on.
#pragma once

namespace minidet {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Turns recording off for a scope (evaluation, optimizer steps, inside an op's forward).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Turns recording on for a scope, e.g. to compute a gradient inside a no-grad region.
class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace minidet
