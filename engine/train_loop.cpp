// train(): the loop of train_loop.h.
#include "engine/train_loop.h"

namespace minidet::engine {

LoopEnd train(Trainer& trainer, int64_t first, const TrainHooks& hooks) {
  const Schedule& s = trainer.config().schedule;
  std::array<double, 5> shown{};  // the last values read, for the steps in between
  int64_t step = first - 1;
  while (step < s.steps) {
    ++step;
    const data::Batch& batch = trainer.forward(step);

    const bool logged = step % s.log_every == 0 || step == s.steps || step == 1;
    const bool evaluating = step == s.steps || (s.eval_every > 0 && step % s.eval_every == 0);
    const bool stopping = hooks.stop_after && hooks.stop_after(step, logged || evaluating);
    if (trainer.reads_every_step() || logged || evaluating || stopping)
      for (const LossRow& row : trainer.read_losses()) shown = row.values;

    const double lr = trainer.lr();  // the rate this step uses; the update sets the next one
    trainer.backward_and_update();

    if (hooks.after_step) hooks.after_step({step, batch, lr, shown, logged, logged || evaluating || stopping});
    if (evaluating && hooks.evaluate) hooks.evaluate(step);
    if (stopping && step < s.steps) return {step, true};
  }
  return {step, false};
}

}  // namespace minidet::engine
