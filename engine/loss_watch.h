// LossWatch: the loss values of recent training steps, kept on the training device until the host needs
// them, so that a CUDA step does not have to stop the GPU just to read five numbers.
//
// A step records (total, four parts) into its row of a small device table (one copy kernel, no sync). The
// host reads the whole table in ONE device-to-host copy only when it must: at a logged step, before an
// evaluation or a checkpoint, when stopping, and at every step in anomaly mode or on the CPU (where the
// "copy" costs nothing). Reading checks every recorded step in order, so a non-finite loss is still
// reported with its own step number and parts, just up to log_every - 1 steps later; no checkpoint or
// evaluation ever sees the parameters those steps updated, because both read the watch first.
//
//   LossWatch watch(capacity, device);
//   watch.record(step, stack(parts).detach());      // every step
//   if (must_look) for (const auto& row : watch.take()) ...   // rows in step order; then the table is empty
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace minidet::engine {

// The four losses of FasterRCNN::forward_train, in the order they are recorded, logged and plotted.
constexpr std::array<const char*, 4> kLossNames = {"loss_objectness", "loss_rpn_box_reg", "loss_classifier",
                                                   "loss_box_reg"};

struct LossRow {
  int64_t step = 0;
  std::array<double, 5> values{};  // total, then metrics.h's kLossNames order
};

class LossWatch {
 public:
  // capacity: rows kept before take() must be called (the loop looks at least every log_every steps).
  LossWatch(int64_t capacity, const Device& device);

  // values: the 5 losses of `step` (any floating dtype, on the watch's device). Throws when the table is full.
  void record(int64_t step, const Tensor& values);
  // The rows recorded since the last take(), oldest first (one device-to-host copy when there are any).
  std::vector<LossRow> take();
  int64_t pending() const { return static_cast<int64_t>(steps_.size()); }

 private:
  Tensor table_;                // (capacity, 5) float64 on the device
  std::vector<int64_t> steps_;  // the step of each filled row
};

}  // namespace minidet::engine
