// The console side of training. On a terminal one line is rewritten in place ('\r') as steps go by (at most
// four times a second), so a reader watches the loss fall without a scrolling wall of numbers; when stdout
// is a file or a CI log, where '\r' would pile up, a plain line is printed every log_every steps instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "engine/metrics.h"

namespace minidet::engine {

class Progress {
 public:
  // allow_live = false prints plain lines even on a terminal. Under mpirun it must be: mpirun hands every rank
  // a pseudo-terminal whatever its own output is (a file, a CI log), so isatty says nothing there.
  Progress(int64_t total_steps, int64_t log_every, bool allow_live = true);

  // After each step. `logged` says whether this step is a log_every step.
  void step(const TrainRecord& record, bool logged);
  // Prints a block of text (an evaluation table, a message) on lines of its own, after the live line.
  void print(const std::string& text);
  bool live() const { return live_; }

 private:
  void end_live_line();

  int64_t total_steps_;
  int64_t log_every_;
  bool live_;             // stdout is a terminal (and live lines are allowed)
  bool line_open_ = false;  // a live line is on screen without its newline
  static constexpr double kRedrawSeconds = 0.25;
  std::chrono::steady_clock::time_point last_redraw_{};
};

// "1:05" or "1:02:05".
std::string format_duration(double seconds);

}  // namespace minidet::engine
