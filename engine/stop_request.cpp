#include "engine/stop_request.h"

#include <csignal>

namespace minidet::engine {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void on_interrupt(int) {
  g_interrupted = 1;
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace

StopRequest::StopRequest(dist::ProcessGroup& group, int64_t stop_after) : group_(group), stop_after_(stop_after) {
  g_interrupted = 0;
  std::signal(SIGINT, on_interrupt);
}

StopRequest::~StopRequest() { std::signal(SIGINT, SIG_DFL); }

bool StopRequest::stop_after(int64_t step, bool ranks_meet) {
  bool interrupted = g_interrupted != 0;
  if (group_.size() > 1)
    interrupted = ranks_meet && group_.all_reduce_sum({interrupted ? 1.0 : 0.0}, "all-reduce of the stop flag")[0] > 0;
  interrupted_ = interrupted;
  return interrupted || (stop_after_ > 0 && step >= stop_after_);
}

}  // namespace minidet::engine
