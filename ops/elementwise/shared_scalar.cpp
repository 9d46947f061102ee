// shared_scalar: the process-wide cache of read-only 0-dim constants (see shared_scalar.h).
#include "ops/elementwise/shared_scalar.h"

#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.h"
#include "core/factories.h"
#include "core/grad_mode.h"

namespace minidet {

namespace {

// Keyed by what is shared (a scalar, or an arange), the value's bits (so -0.0 and 0.0, and NaN payloads,
// stay apart) or the arange's length, with the dtype and device.
enum class Kind { kScalar, kArange, kCount };
using Key = std::tuple<Kind, uint64_t, int, int, int>;

// The constants, and how many of each kind are kept: each kind has its own cap, so that scalars that change
// every call cannot push the aranges out.
struct Cache {
  std::mutex mutex;
  std::map<Key, Tensor> constants;
  std::array<size_t, static_cast<size_t>(Kind::kCount)> kept{};
};
// Never destroyed: the tensors must not be freed after the CUDA runtime has shut down at exit.
Cache& cache() {
  static auto* state = new Cache();
  return *state;
}

// The cached constant under `key`, made by `make` the first time. `why`: what a write to it reports (a
// string literal: the tensor keeps the pointer).
Tensor shared(const Key& key, const char* why, const std::function<Tensor()>& make) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto found = c.constants.find(key);
  if (found != c.constants.end()) return found->second;
  NoGradGuard constant;  // a leaf that never requires grad, whatever mode the first caller was in
  Tensor made = make();
  // Read-only even past the cap, so a caller never depends on whether its constant happened to be cached.
  made.make_read_only(why);
  size_t& kept = c.kept[static_cast<size_t>(std::get<0>(key))];
  if (kept < kMaxSharedScalars) {
    c.constants.emplace(key, made);
    kept++;
  }
  return made;
}

Key key_of(Kind kind, uint64_t value, const TensorOptions& options) {
  return {kind, value, static_cast<int>(options.dtype), static_cast<int>(options.device.type), options.device.index};
}

}  // namespace

Tensor shared_scalar(double value, const TensorOptions& options) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return shared(key_of(Kind::kScalar, bits, options),
                "a shared_scalar constant, which every caller asking for the same value shares "
                "(ops/elementwise/shared_scalar.h)",
                [&] { return full({}, value, options); });
}

Tensor shared_arange(int64_t n, const TensorOptions& options) {
  MINIDET_CHECK(n >= 0, "shared_arange: expected a length >= 0, got ", n);
  return shared(key_of(Kind::kArange, static_cast<uint64_t>(n), options),
                "a shared_arange constant, which every caller asking for the same length shares "
                "(ops/elementwise/shared_scalar.h)",
                [&] { return arange(static_cast<double>(n), options); });
}

int64_t shared_scalar_count() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return static_cast<int64_t>(c.constants.size());
}

}  // namespace minidet
