// train(): the training loop every program shares, around Trainer's step (trainer.h), with hooks for what
// a program does besides training: logging, evaluation, checkpoints, stopping early. detectron2's
// TrainerBase.train with its HookBase.after_step is the model.
//
// Per step, in this order:
//   1. forward: the batch and its four losses, kept on the device (Trainer::forward)
//   2. decisions, the same on every rank: is the step logged (every log_every steps, the first and the
//      last), evaluated (every eval_every steps and the last), does the run stop after it (hooks.stop_after)
//   3. read the losses when one of those needs them, or on the CPU every step (Trainer::read_losses); a
//      non-finite loss ends the run here, before the update
//   4. backward and the update (Trainer::backward_and_update)
//   5. hooks.after_step, then hooks.evaluate at an evaluated step; then stop if asked
// On a GPU, step 3 is the only place the host waits for the device, so the host queues the next steps
// while the GPU runs this one (loss_watch.h).
#pragma once

#include <array>
#include <functional>

#include "engine/trainer.h"

namespace minidet::engine {

// What after_step is told.
struct StepReport {
  int64_t step = 0;
  const data::Batch& batch;       // this rank's part of the global batch
  double lr = 0;                  // the learning rate the step trained with
  std::array<double, 5> losses{}; // the latest values read (total, then kLossNames order): this step's at
                                  // a logged step, an earlier step's in between on a GPU
  bool logged = false;            // a log_every step, or the first or the last
  bool ranks_meet = false;        // logged, evaluated or stopping: the ranks met to read the losses
};

struct TrainHooks {
  std::function<void(const StepReport&)> after_step;
  std::function<void(int64_t step)> evaluate;
  // Whether to stop after `step`; ranks_meet says the ranks meet at this step anyway (so a flag can be
  // shared there). Unset: never stop early.
  std::function<bool(int64_t step, bool ranks_meet)> stop_after;
};

struct LoopEnd {
  int64_t step = 0;      // the last step trained
  bool stopped = false;  // stopped by stop_after before the schedule's last step
};

// Trains steps first..schedule.steps (first > 1 continues a restored run).
LoopEnd train(Trainer& trainer, int64_t first, const TrainHooks& hooks);

}  // namespace minidet::engine
