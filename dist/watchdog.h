// Watchdog: turns a hang in a collective into a clear error within a bounded time.
//
// A collective (all-reduce, broadcast, barrier) returns only when every rank has joined it. When one rank
// dies, MPI's default error handler (errors are fatal) already ends the job. When one rank hangs (a
// deadlock, a stuck GPU, a rank stopped in a debugger), the others would wait forever. So every blocking
// collective runs inside a Watchdog::Scope naming it; a background thread checks once a second and, when a
// scope has lasted longer than the timeout, calls on_timeout with a message naming this rank and the
// operation. dist::ProcessGroup's on_timeout prints it and calls MPI_Abort, which stops every rank.
//
// One scope at a time: collectives are issued from the training thread only. Work that no host thread waits
// for (NCCL collectives, ordered on the GPU by events) is watched by a background check instead: the same
// thread calls it once a second, and it names what is late or failed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace minidet::dist {

class Watchdog {
 public:
  // timeout_seconds <= 0 disables the watchdog (no thread is started).
  Watchdog(double timeout_seconds, std::function<void(const std::string& message)> on_timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  double timeout_seconds() const { return timeout_seconds_; }

  // Called from the watchdog's thread once a second (never with its lock held): returns "" while all is
  // well, else the message to stop the job with. Replaces any earlier check; no thread, no calls.
  void set_background_check(std::function<std::string()> check);

  // Marks `what` as in progress for the scope's lifetime.
  class Scope {
   public:
    Scope(Watchdog& watchdog, std::string what);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog& watchdog_;
  };

 private:
  void loop();

  double timeout_seconds_;
  std::function<void(const std::string&)> on_timeout_;
  std::function<std::string()> background_check_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool active_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point started_;
  std::thread thread_;
};

}  // namespace minidet::dist
