#include "core/deterministic.h"

#include <atomic>

namespace minidet {
namespace {
std::atomic<bool> g_deterministic{false};
}
bool DeterministicMode::is_enabled() { return g_deterministic.load(); }
void DeterministicMode::set_enabled(bool enabled) { g_deterministic.store(enabled); }
}  // namespace minidet
