// StopRequest: when a run stops before its last step, and how every rank comes to the same step.
//
// Two things ask to stop: Ctrl-C (SIGINT), after the current step (a second Ctrl-C kills at once: the
// handler restores the default action), and --stop-after N, at step N. Alone, a process sees its request at
// once. With several ranks, a Ctrl-C reaches one rank only (mpirun does not forward it), so the ranks share
// the flag by a host all-reduce of one number, at the next step where they meet anyway (a logged or
// evaluated step, whose losses are read there): an all-reduce every step would tie the hosts together at
// each step, and any one's hiccup would stall the others.
#pragma once

#include <cstdint>

#include "dist/process_group.h"

namespace minidet::engine {

class StopRequest {
 public:
  // Installs the SIGINT handler (and forgets an earlier run's Ctrl-C); the destructor restores the default.
  StopRequest(dist::ProcessGroup& group, int64_t stop_after);
  ~StopRequest();
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  // After `step`: whether to stop, the same answer on every rank. `ranks_meet`: this step is one where the
  // ranks meet anyway; it must be the same on every rank.
  bool stop_after(int64_t step, bool ranks_meet);
  // Whether the stop came from Ctrl-C (exit code 130) rather than --stop-after (0).
  bool interrupted() const { return interrupted_; }

 private:
  dist::ProcessGroup& group_;
  int64_t stop_after_;
  bool interrupted_ = false;
};

}  // namespace minidet::engine
