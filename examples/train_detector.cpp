// train_detector: a short tour of the training engine (engine/), the one that `minidet train` and
// bench_detector run on. It trains the tiny Faster R-CNN on the synthetic shapes and scores the held-out
// split with the VOC (mAP@0.5) and COCO (AP@[0.5:0.95]) evaluators, on the CPU or a GPU.
//
//   train_detector [--device auto|cpu|cuda] [--config run.json] [--set schedule.steps=300 ...]
//
// The engine in four pieces, each a few lines below:
//   1. RunConfig (engine/run_config.h): the schedule, the data and the detector, with `minidet train`'s
//      defaults and the same --set keys;
//   2. open_datasets (engine/datasets.h): the training and held-out splits that config names;
//   3. Trainer (engine/trainer.h): the detector, AdamW, the warm-up + cosine schedule and the loader, and the
//      step: forward_train's four losses, backward, the update;
//   4. train() (engine/train_loop.h): the loop, calling our hooks after each step and at each evaluation.
// `minidet train` (examples/minidet/train.cpp) adds run folders, plots, checkpoints and exact resume through
// the same hooks.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/checkpoints.h"
#include "engine/datasets.h"
#include "engine/evaluation.h"
#include "engine/train_loop.h"
#include "engine/trainer.h"

using namespace minidet;

int main(int argc, char** argv) {
  CLI::App app{"Train the tiny Faster R-CNN on the synthetic shapes with minidet's engine, then evaluate it"};
  std::string device_name = "auto", config_path;
  std::vector<std::string> overrides;
  app.add_option("--device", device_name, "auto (the GPU when there is one), cpu or cuda");
  app.add_option("--config", config_path, "a run config (JSON), as `minidet train --config` reads");
  app.add_option("--set", overrides, "override a config key, e.g. --set schedule.steps=300")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI11_PARSE(app, argc, argv);

  try {
    // 1. The config: defaults, then the file, then each --set in order.
    engine::RunConfig config = config_path.empty() ? engine::RunConfig() : engine::RunConfig::load(config_path);
    for (const std::string& assignment : overrides) config.set(assignment);
    config.validate();
    // 2. The data.
    const engine::Datasets data = engine::open_datasets(config, /*need_train=*/true);
    // 3. The trainer.
    const Device device = engine::pick_device(device_name);
    engine::Trainer trainer(config, *data.train, device);
    std::printf("FasterRCNN: %lld parameters on %s; %lld training and %lld held-out images\n",
                static_cast<long long>(trainer.model().num_parameters()), device.is_cuda() ? "the GPU" : "the CPU",
                static_cast<long long>(data.train->size()), static_cast<long long>(data.val->size()));

    // 4. The loop, with two hooks: print the losses at the logged steps, evaluate at the evaluation steps.
    const auto start = std::chrono::steady_clock::now();
    const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    engine::TrainHooks hooks;
    hooks.after_step = [&](const engine::StepReport& r) {
      if (!r.logged) return;
      std::printf("step %5lld/%lld  loss %.4f  objectness %.4f  rpn_box %.4f  classifier %.4f  box %.4f  lr %.2e  %.1f s\n",
                  static_cast<long long>(r.step), static_cast<long long>(config.schedule.steps), r.losses[0],
                  r.losses[1], r.losses[2], r.losses[3], r.losses[4], r.lr, seconds());
      std::fflush(stdout);
    };
    hooks.evaluate = [&](int64_t step) {
      // predict() switches the model to eval() (BatchNorm's running statistics) and back.
      const engine::Scores scores = engine::score(*data.val, engine::predict(trainer.model(), *data.val, config.schedule.batch));
      std::printf("evaluation at step %lld: mAP@0.5 %.4f  COCO AP %.4f\n%s", static_cast<long long>(step), scores.map50,
                  scores.coco[0], step == config.schedule.steps ? scores.table.c_str() : "");
      std::fflush(stdout);
    };
    engine::train(trainer, /*first=*/1, hooks);
    std::printf("trained %lld steps in %.1f s\n", static_cast<long long>(config.schedule.steps), seconds());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_detector: %s\n", e.what());
    return 1;
  }
  return 0;
}
