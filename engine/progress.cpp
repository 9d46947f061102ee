// See progress.h.
#include "engine/progress.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

namespace minidet::engine {

Progress::Progress(int64_t total_steps, int64_t log_every, bool allow_live)
    : total_steps_(total_steps), log_every_(log_every), live_(allow_live && isatty(fileno(stdout)) != 0) {}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long total = std::lround(seconds);
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", total / 3600, total / 60 % 60, total % 60);
  else
    std::snprintf(text, sizeof text, "%ld:%02ld", total / 60, total % 60);
  return text;
}

void Progress::step(const TrainRecord& r, bool logged) {
  if (!live_ && !logged) return;
  // A terminal is redrawn at most every kRedrawSeconds (and at logged steps and the last one): dozens of
  // steps a second on a GPU would otherwise cost a write and a flush each, through mpirun's forwarding too.
  const auto now = std::chrono::steady_clock::now();
  if (live_ && !logged && r.step != total_steps_ &&
      std::chrono::duration<double>(now - last_redraw_).count() < kRedrawSeconds)
    return;
  last_redraw_ = now;
  char text[256];
  std::snprintf(text, sizeof text,
                "step %*lld/%lld  loss %.4f (obj %.4f rpn_box %.4f cls %.4f box %.4f)  lr %.2e  %.1f img/s  ETA %s",
                static_cast<int>(std::to_string(total_steps_).size()), static_cast<long long>(r.step),
                static_cast<long long>(total_steps_), r.loss, r.parts[0], r.parts[1], r.parts[2], r.parts[3], r.lr,
                r.images_per_s, format_duration(r.eta_s).c_str());
  if (live_) {
    std::printf("\r%s\033[K", text);  // \033[K clears what a longer previous line left
    line_open_ = true;
  } else {
    std::printf("%s\n", text);
  }
  std::fflush(stdout);
}

void Progress::end_live_line() {
  if (line_open_) std::printf("\n");
  line_open_ = false;
}

void Progress::print(const std::string& text) {
  end_live_line();
  std::printf("%s%s", text.c_str(), !text.empty() && text.back() == '\n' ? "" : "\n");
  std::fflush(stdout);
}

}  // namespace minidet::engine
