#include "autograd/scope.h"

namespace minidet::autograd {
namespace {
thread_local bool t_recording = false;
thread_local std::string t_scope;
}  // namespace

bool scopes_recording() { return t_recording; }
const std::string& current_scope() { return t_scope; }

ScopeRecordingGuard::ScopeRecordingGuard() : previous_(t_recording) { t_recording = true; }
ScopeRecordingGuard::~ScopeRecordingGuard() { t_recording = previous_; }

ScopeGuard::ScopeGuard(const std::string& name, bool replace) {
  if (!t_recording || (name.empty() && !replace)) return;
  active_ = true;
  previous_ = t_scope;
  if (replace) t_scope = name;
  else t_scope += (t_scope.empty() ? "" : ".") + name;
}

ScopeGuard::~ScopeGuard() {
  if (active_) t_scope = std::move(previous_);
}

}  // namespace minidet::autograd
