// See watchdog.h.
#include "dist/watchdog.h"

#include <cstdio>

namespace minidet::dist {

Watchdog::Watchdog(double timeout_seconds, std::function<void(const std::string&)> on_timeout)
    : timeout_seconds_(timeout_seconds), on_timeout_(std::move(on_timeout)) {
  if (timeout_seconds_ > 0) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Watchdog::Scope::Scope(Watchdog& watchdog, std::string what) : watchdog_(watchdog) {
  std::lock_guard<std::mutex> lock(watchdog_.mutex_);
  watchdog_.active_ = true;
  watchdog_.what_ = std::move(what);
  watchdog_.started_ = std::chrono::steady_clock::now();
}

Watchdog::Scope::~Scope() {
  std::lock_guard<std::mutex> lock(watchdog_.mutex_);
  watchdog_.active_ = false;
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    // Waking once a second bounds the delay between the timeout and the abort to about a second.
    wake_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_ || !active_) continue;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    if (waited < timeout_seconds_) continue;
    char message[512];
    std::snprintf(message, sizeof message,
                  "%s did not finish within %.0f s (--dist-timeout): another rank died, hangs or is far behind",
                  what_.c_str(), timeout_seconds_);
    active_ = false;  // report once
    lock.unlock();
    on_timeout_(message);  // normally does not return (MPI_Abort)
    lock.lock();
  }
}

}  // namespace minidet::dist
