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

void Watchdog::set_background_check(std::function<std::string()> check) {
  std::lock_guard<std::mutex> lock(mutex_);
  background_check_ = std::move(check);
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    // Waking once a second bounds the delay between the timeout and the abort to about a second.
    wake_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_) continue;
    if (background_check_) {
      const std::function<std::string()> check = background_check_;
      lock.unlock();
      const std::string problem = check();
      lock.lock();
      if (!problem.empty()) {
        background_check_ = nullptr;  // report once
        lock.unlock();
        on_timeout_(problem);  // normally does not return (MPI_Abort)
        lock.lock();
        continue;
      }
    }
    if (!active_) continue;
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
