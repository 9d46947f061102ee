#include "autograd/anomaly.h"

#include <cxxabi.h>
#include <execinfo.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace minidet::autograd {
namespace {

std::atomic<bool> g_anomaly_enabled{false};

// backtrace_symbols gives "binary(mangled+0x1f) [0xaddr]"; show the demangled function name when present.
std::string demangle_frame(const char* frame) {
  std::string text(frame);
  const size_t open = text.find('('), plus = text.find('+', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || plus == std::string::npos || plus == open + 1) return text;
  const std::string mangled = text.substr(open + 1, plus - open - 1);
  int status = 0;
  char* name = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || name == nullptr) return text;
  std::string out(name);
  std::free(name);
  return out;
}

}  // namespace

bool AnomalyMode::is_enabled() { return g_anomaly_enabled.load(); }
void AnomalyMode::set_enabled(bool enabled) { g_anomaly_enabled.store(enabled); }

std::string capture_creation_context(const std::string& op_name) {
  void* frames[32];
  const int count = backtrace(frames, 32);
  char** symbols = backtrace_symbols(frames, count);
  std::ostringstream out;
  out << "op '" << op_name << "' created at:";
  int shown = 0;
  for (int i = 0; i < count && symbols != nullptr && shown < 12; ++i) {
    const std::string frame = demangle_frame(symbols[i]);
    // Skip the frames of this function and autograd::record: the reader wants the op and its caller.
    if (frame.find("capture_creation_context") != std::string::npos ||
        frame.find("autograd::record") != std::string::npos)
      continue;
    out << "\n    " << frame;
    ++shown;
  }
  std::free(symbols);
  return out.str();
}

bool has_nan_or_inf(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return false;
  for (double v : t.to_vector<double>())
    if (!std::isfinite(v)) return true;
  return false;
}

}  // namespace minidet::autograd
