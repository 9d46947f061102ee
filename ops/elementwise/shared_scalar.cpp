// shared_scalar: the process-wide cache of read-only 0-dim constants (see shared_scalar.h).
#include "ops/elementwise/shared_scalar.h"

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "core/factories.h"
#include "core/grad_mode.h"

namespace minidet {

namespace {

// Keyed by the value's bits (so -0.0 and 0.0, and NaN payloads, stay apart) with the dtype and device.
using Key = std::tuple<uint64_t, int, int, int>;

std::mutex& cache_mutex() {
  static std::mutex mutex;
  return mutex;
}
// Never destroyed: the tensors must not be freed after the CUDA runtime has shut down at exit.
std::map<Key, Tensor>& cache() {
  static auto* constants = new std::map<Key, Tensor>();
  return *constants;
}

}  // namespace

Tensor shared_scalar(double value, const TensorOptions& options) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  const Key key{bits, static_cast<int>(options.dtype), static_cast<int>(options.device.type), options.device.index};
  std::lock_guard<std::mutex> lock(cache_mutex());
  const auto found = cache().find(key);
  if (found != cache().end()) return found->second;
  NoGradGuard constant;  // a leaf that never requires grad, whatever mode the first caller was in
  Tensor made = full({}, value, options);
  // Read-only even past the cap, so a caller never depends on whether its constant happened to be cached.
  made.make_read_only("a shared_scalar constant, which every caller asking for the same value shares "
                      "(ops/elementwise/shared_scalar.h)");
  if (cache().size() < kMaxSharedScalars) cache().emplace(key, made);
  return made;
}

int64_t shared_scalar_count() {
  std::lock_guard<std::mutex> lock(cache_mutex());
  return static_cast<int64_t>(cache().size());
}

}  // namespace minidet
