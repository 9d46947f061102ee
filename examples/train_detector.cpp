// train_detector: train the tiny Faster R-CNN on the synthetic shapes and evaluate it on the held-out split
// with the VOC (mAP@0.5) and COCO (AP@[0.5:0.95]) evaluators, on the CPU or a GPU.
//
//   train_detector [--device auto|cpu|cuda] [--steps 600] [--batch 8] [--lr 3e-3] [--image-size 128]
//                  [--train-images 2000] [--test-images 200] [--eval-every 0] [--seed 0]
//                  [--config detector.json] [--set key=value ...] [--save-config FILE]
//
// The loop is the textbook one, written out so a reader sees every piece: a shuffled loader with random
// horizontal flips, AdamW with a linear warm-up and a cosine decay, FasterRCNN::forward_train's four losses
// summed, backward, a step. Evaluation switches the model to eval() (BatchNorm's running statistics), runs
// forward_infer over the test split and scores the detections. The minidet command (examples/minidet/,
// docs/minidet-command.md) grows this into a full CLI with run folders, plots, checkpoints and exact resume.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cuda/availability.h"
#include "core/factories.h"
#include "data/eval/coco_eval.h"
#include "data/eval/eval_types.h"
#include "data/eval/voc_eval.h"
#include "data/loader/loader.h"
#include "data/shapes/shapes_dataset.h"
#include "data/transforms/transforms.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "nn/optim/adam.h"
#include "nn/optim/lr_scheduler.h"

using namespace minidet;

namespace {

using Clock = std::chrono::steady_clock;
double host_value(const Tensor& t) { return t.detach().to(Device::cpu()).to(kFloat64).item<double>(); }

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Scores {
  double map50 = 0, coco_ap = 0;
  std::string voc_table, coco_summary;
};

// Detections for every image of `dataset` (in index order, batches of `batch`), scored by both evaluators.
Scores evaluate(models::FasterRCNN& model, const data::Dataset& dataset, int64_t batch) {
  model.eval();
  data::LoaderOptions options;
  options.batch_size = batch;
  options.shuffle = false;
  data::DataLoader loader(dataset, options);
  std::vector<data::Detection> detections;
  while (auto b = loader.next()) {
    const std::vector<models::Detections> out = model.forward_infer(*b);
    for (size_t n = 0; n < out.size(); ++n) {
      const std::vector<float> boxes = out[n].boxes.to(kFloat32).to_vector<float>();
      const std::vector<float> scores = out[n].scores.to(kFloat32).to_vector<float>();
      const std::vector<int64_t> labels = out[n].labels.to_vector<int64_t>();
      for (size_t d = 0; d < scores.size(); ++d)
        detections.push_back({b->image_ids[n], dataset.category_id(labels[d]),
                              {boxes[4 * d], boxes[4 * d + 1], boxes[4 * d + 2], boxes[4 * d + 3]}, scores[d]});
    }
  }
  model.train();
  const data::GroundTruth truth = data::ground_truth_from_dataset(dataset);
  const data::VocResult voc = data::evaluate_voc(truth, detections);
  const data::CocoEvalResult coco = data::evaluate_coco(truth, detections);
  return {voc.mean_average_precision, coco.stats[0], data::format_voc(voc), data::format_coco_summary(coco)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train the tiny Faster R-CNN on the synthetic shapes and evaluate it (VOC mAP@0.5, COCO AP)"};
  std::string device_name = "auto", config_path, save_config;
  std::vector<std::string> overrides;
  int64_t steps = 600, batch = 8, image_size = 128, train_images = 2000, test_images = 200, eval_every = 0;
  int64_t warmup = 100;
  double lr = 3e-3, weight_decay = 1e-4;
  uint64_t seed = 0;
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a later flag wins
  app.add_option("--device", device_name, "auto (the GPU when there is one), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--steps", steps, "training steps")->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "images per step")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "AdamW learning rate after warm-up")->check(CLI::PositiveNumber);
  app.add_option("--weight-decay", weight_decay, "AdamW's decoupled weight decay");
  app.add_option("--warmup", warmup, "linear warm-up steps");
  app.add_option("--image-size", image_size, "side of the square images")->check(CLI::Range(16, 1024));
  app.add_option("--train-images", train_images, "images in the training split")->check(CLI::PositiveNumber);
  app.add_option("--test-images", test_images, "images in the held-out split")->check(CLI::PositiveNumber);
  app.add_option("--eval-every", eval_every, "evaluate every N steps (0: only at the end)");
  app.add_option("--seed", seed, "seed of the weights, the data order and the samplers");
  app.add_option("--config", config_path, "DetectorConfig JSON (see models/faster_rcnn/detector_config.h)");
  app.add_option("--set", overrides, "override a config key, e.g. --set rpn.train.post_nms_top_n=500")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--save-config", save_config, "write the resolved config here");
  CLI11_PARSE(app, argc, argv);

  try {
    if (device_name == "auto") device_name = cuda::is_available() ? "cuda" : "cpu";
    const Device device = Device::parse(device_name);
    if (device.is_cuda() && !cuda::is_available()) {
      std::fprintf(stderr, "train_detector: --device cuda but no GPU is available\n");
      return 1;
    }
    models::DetectorConfig config = config_path.empty() ? models::DetectorConfig() : models::DetectorConfig::load(config_path);
    for (const std::string& o : overrides) config.set(o);
    config.validate();
    if (!save_config.empty()) config.save(save_config);

    data::ShapesOptions shapes;
    shapes.image_width = shapes.image_height = image_size;
    shapes.num_classes = config.num_classes;
    shapes.train_images = train_images;
    shapes.test_images = test_images;
    const data::ShapesDataset train_set(data::Split::kTrain, shapes), test_set(data::Split::kTest, shapes);

    Generator generator(seed);
    models::FasterRCNN model(config, &generator);
    model.to(device);
    std::printf("FasterRCNN: %lld parameters on %s; %lld training and %lld test images of %lld px\n",
                static_cast<long long>(model.num_parameters()), device_name.c_str(),
                static_cast<long long>(train_images), static_cast<long long>(test_images),
                static_cast<long long>(image_size));

    nn::Adam optimizer({{model.parameters(), lr, weight_decay}}, nn::AdamOptions{0.9, 0.999, 1e-8, true});
    nn::WarmupCosineLR schedule(optimizer, steps, 0.01, std::min(warmup, steps / 5));  // short runs: short warm-up
    data::LoaderOptions loader_options;
    loader_options.batch_size = batch;
    loader_options.seed = seed;
    loader_options.drop_last = true;
    loader_options.transform = data::random_horizontal_flip(0.5);
    data::DataLoader loader(train_set, loader_options);

    const auto start = Clock::now();
    double train_seconds = 0, smoothed = 0;
    for (int64_t step = 1; step <= steps; ++step) {
      std::optional<data::Batch> batch_data = loader.next();
      if (!batch_data) {
        loader.start_epoch(loader.epoch() + 1);
        batch_data = loader.next();
      }
      const models::Losses losses = model.forward_train(*batch_data, &generator);
      const Tensor total = models::FasterRCNN::total_loss(losses);
      optimizer.zero_grad();
      total.backward();
      optimizer.step();
      schedule.step();
      const double value = host_value(total);
      smoothed = step == 1 ? value : 0.9 * smoothed + 0.1 * value;
      if (step == 1 || step % 20 == 0 || step == steps) {
        std::printf("step %5lld/%lld  loss %.4f (avg %.4f)  objectness %.4f  rpn_box %.4f  classifier %.4f  box %.4f"
                    "  lr %.2e  %.1f s\n",
                    static_cast<long long>(step), static_cast<long long>(steps), value, smoothed,
                    host_value(losses.at("loss_objectness")),
                    host_value(losses.at("loss_rpn_box_reg")),
                    host_value(losses.at("loss_classifier")),
                    host_value(losses.at("loss_box_reg")), schedule.lr(), seconds_since(start));
        std::fflush(stdout);
      }
      if (eval_every > 0 && step % eval_every == 0 && step != steps) {
        train_seconds = seconds_since(start);
        const Scores s = evaluate(model, test_set, batch);
        std::printf("eval at step %lld (%.1f s of training): mAP@0.5 %.4f  COCO AP %.4f\n",
                    static_cast<long long>(step), train_seconds, s.map50, s.coco_ap);
      }
    }
    train_seconds = seconds_since(start);
    const auto eval_start = Clock::now();
    const Scores s = evaluate(model, test_set, batch);
    std::printf("\n%s\n%s\n", s.voc_table.c_str(), s.coco_summary.c_str());
    std::printf("final: mAP@0.5 %.4f  COCO AP@[0.5:0.95] %.4f  after %lld steps of %lld images in %.1f s "
                "(evaluation %.1f s) on %s\n",
                s.map50, s.coco_ap, static_cast<long long>(steps), static_cast<long long>(batch), train_seconds,
                seconds_since(eval_start), device_name.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_detector: %s\n", e.what());
    return 1;
  }
  return 0;
}
