// Anomaly mode: find the op whose backward produced NaN or Inf.
//
// While enabled, every recorded node remembers where its forward op was called (a demangled stack trace),
// and the engine checks each gradient a node returns. The first NaN/Inf stops backward with an error that
// names the node and shows where its forward op was created:
//
//   autograd::DetectAnomalyGuard guard;
//   loss.backward();   // Error: anomaly: backward of 'log' produced NaN in the gradient of input 0 ...
//
// It costs a stack capture per op and a scan of every gradient, so it is for debugging only.
#pragma once

#include <string>

#include "core/tensor.h"

namespace minidet::autograd {

struct AnomalyMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : previous_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(true); }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

// "op 'name' created at:" followed by the caller frames (minidet's own autograd frames skipped).
std::string capture_creation_context(const std::string& op_name);
// True if any element of a floating tensor is NaN or +-Inf.
bool has_nan_or_inf(const Tensor& t);

}  // namespace minidet::autograd
