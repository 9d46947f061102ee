// The training engine: Trainer's exact resume, the loop's hooks and decisions, and its refusals. On the CPU,
// with the tiny detector (tests/models/tiny_detector.h) on 32 x 32 shapes, a few steps each.
#include <vector>

#include "data/shapes/shapes_dataset.h"
#include "engine/train_loop.h"
#include "engine/trainer.h"
#include "tests/models/tiny_detector.h"
#include "tests/support.h"

using namespace minidet;

namespace {

data::ShapesDataset tiny_shapes(int64_t images) {
  data::ShapesOptions o;
  o.image_width = o.image_height = 32;
  o.num_classes = 2;
  o.max_objects = 2;
  o.min_object_fraction = 0.3;
  o.train_images = images;
  o.test_images = 4;
  return data::ShapesDataset(data::Split::kTrain, o);
}

engine::RunConfig tiny_run(int64_t steps) {
  engine::RunConfig config;
  config.detector = test::tiny_detector_config();
  config.schedule.steps = steps;
  config.schedule.batch = 2;
  config.schedule.warmup = 2;
  config.schedule.log_every = 3;
  config.schedule.eval_every = 4;
  return config;
}

// Every step's (step, total, parts) as the engine reads them.
std::vector<engine::LossRow> train_steps(engine::Trainer& trainer, int64_t first, int64_t last) {
  std::vector<engine::LossRow> rows;
  for (int64_t step = first; step <= last; ++step) {
    trainer.forward(step);
    for (const engine::LossRow& row : trainer.read_losses()) rows.push_back(row);
    trainer.backward_and_update();
  }
  return rows;
}

}  // namespace

TEST_CASE("values/trainer: a run restored from its checkpoint trains the uninterrupted run's losses bit for bit") {
  const data::ShapesDataset shapes = tiny_shapes(6);  // 3 batches per epoch: the resume crosses an epoch
  const engine::RunConfig config = tiny_run(8);
  engine::Trainer whole(config, shapes, Device::cpu());
  const std::vector<engine::LossRow> want = train_steps(whole, 1, 8);

  engine::Trainer first_half(config, shapes, Device::cpu());
  train_steps(first_half, 1, 4);
  const nn::Checkpoint checkpoint = first_half.capture(4);
  engine::Trainer resumed(config, shapes, Device::cpu());
  CHECK(resumed.restore(checkpoint) == 4);
  const std::vector<engine::LossRow> got = train_steps(resumed, 5, 8);
  REQUIRE(got.size() == 4);
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(got[i].step);
    CHECK(got[i].step == want[4 + i].step);
    for (size_t k = 0; k < 5; ++k) CHECK(got[i].values[k] == want[4 + i].values[k]);  // exact
  }
}

TEST_CASE("values/train_loop: hooks see every step, evaluate at eval_every and the last, and stop_after stops") {
  const data::ShapesDataset shapes = tiny_shapes(8);
  engine::Trainer trainer(tiny_run(7), shapes, Device::cpu());
  std::vector<int64_t> steps, logged, evaluated;
  engine::TrainHooks hooks;
  hooks.after_step = [&](const engine::StepReport& r) {
    steps.push_back(r.step);
    if (r.logged) logged.push_back(r.step);
    CHECK(r.batch.size() == 2);
    CHECK(r.losses[0] > 0);  // read at every step on the CPU
    CHECK(r.lr > 0);
  };
  hooks.evaluate = [&](int64_t step) { evaluated.push_back(step); };
  const engine::LoopEnd end = engine::train(trainer, 1, hooks);
  CHECK(end.step == 7);
  CHECK(!end.stopped);
  CHECK(steps == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7});
  CHECK(logged == std::vector<int64_t>{1, 3, 6, 7});
  CHECK(evaluated == std::vector<int64_t>{4, 7});

  engine::Trainer stopping(tiny_run(7), shapes, Device::cpu());
  hooks.stop_after = [](int64_t step, bool) { return step == 2; };
  const engine::LoopEnd stopped = engine::train(stopping, 1, hooks);
  CHECK(stopped.step == 2);
  CHECK(stopped.stopped);

  // A restored run continues at `first`: the steps before it are not trained again.
  steps.clear();
  hooks.stop_after = nullptr;
  engine::Trainer continuing(tiny_run(7), shapes, Device::cpu());
  CHECK(engine::train(continuing, 6, hooks).step == 7);
  CHECK(steps == std::vector<int64_t>{6, 7});
}

TEST_CASE("errors/trainer: a dataset smaller than one batch is refused by name") {
  const data::ShapesDataset one = tiny_shapes(1);
  CHECK_THROWS_CONTAINING(engine::Trainer(tiny_run(3), one, Device::cpu()),
                          "the training data has 1 images, fewer than one batch of 2");
}
