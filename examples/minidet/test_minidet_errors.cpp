// The minidet program's refusals, end to end: bad flags, files, data and checkpoints, a non-finite loss,
// sizes no machine could hold. Each case runs the built binary (MINIDET_EXE) and checks that it ends with one
// clear line on stderr and a non-zero exit code (test_minidet_cli.cpp has the runs that succeed).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/factories.h"
#include "data/image/image_io.h"
#include "examples/minidet/cli_test_support.h"
#include "nn/checkpoint/checkpoint.h"

namespace fs = std::filesystem;
using namespace minidet;
using namespace minidet_cli_test;

namespace {

// A folder holding `run`, a finished 2-step CPU run of the tiny config, for the cases that need a checkpoint.
fs::path folder_with_trained_run(const std::string& name) {
  const fs::path folder = fresh_folder(name);
  write_text(folder / "tiny.json", kTinyConfig);
  const Result trained = run_minidet(folder, "train --config tiny.json --device cpu --out run "
                                             "--set schedule.steps=2 --set schedule.eval_every=0");
  REQUIRE_MESSAGE(trained.code == 0, trained.err);
  return folder;
}

}  // namespace

TEST_CASE("errors/minidet: bad arguments, files and data give one clear line and a non-zero exit") {
  const fs::path folder = folder_with_trained_run("errors");
  // A checkpoint without the program's config entry: saved by the library, not by `minidet train`.
  nn::Checkpoint foreign;
  foreign.put("weights", from_vector<float>({1, 2, 3}));
  nn::save_checkpoint((folder / "foreign.ckpt").string(), foreign);
  // COCO files: one whose annotation points at a missing image entry, one whose image file is missing.
  // (The run stores data paths absolute, so the messages name them so.)
  fs::create_directories(folder / "images");
  const std::string image = R"("images": [{"id": 1, "file_name": "a.png", "width": 64, "height": 64}])";
  const std::string category = R"("categories": [{"id": 1, "name": "thing"}])";
  write_text(folder / "bad_reference.json",
             "{" + image + R"(, "annotations": [{"id": 1, "image_id": 7, "category_id": 1, "bbox": [1, 1, 5, 5]}], )" +
                 category + "}");
  write_text(folder / "missing_file.json", "{" + image + R"(, "annotations": [], )" + category + "}");
  data::write_png(data::Image(40, 30), (folder / "picture.png").string());
  const std::string cores = std::to_string(std::thread::hardware_concurrency());

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --device gpu", "--device: gpu not in {auto,cpu,cuda} (see minidet --help)"},
      {"train --set schedule.stepz=3",
       "config: unknown key 'schedule.stepz' (known keys: steps, batch, lr, weight_decay, warmup, min_lr_factor, "
       "eval_every, log_every, flip_probability, seed, detection_images, cuda_graphs)"},
      {"train --set steps=3", "--set steps: name a section (schedule., data. or detector.), e.g. schedule.steps=300"},
      {"train --set detector.rpn.train.post_nms_topn=500",
       "config: unknown key 'detector.rpn.train.post_nms_topn' (known keys: min_size, nms_threshold, post_nms_top_n, "
       "pre_nms_top_n, score_threshold)"},
      {"train --set detector.num_classes=2.5", "config: detector.num_classes must be an integer, got 2.5"},
      {"train --set schedule.steps=0", "config: schedule.steps must be at least 1, got 0"},
      {"train --config tiny.json --out run",
       "run folder 'run' already holds a run: continue it with --resume run or choose another --out"},
      {"train --resume run --set detector.num_classes=2",
       "checkpoint 'run/last.ckpt' was trained with another config: on --resume only schedule.* keys may be changed"},
      {"train --train-json bad_reference.json --train-images images --val-json bad_reference.json "
       "--val-images images --out coco",
       "coco: annotations[0] (id 1) in " + (folder / "bad_reference.json").string() +
           ": image_id 7 is not among the images"},
      {"train --train-json missing_file.json --train-images images --val-json missing_file.json "
       "--val-images images --out coco",
       "coco: images[0] (id 1) in " + (folder / "missing_file.json").string() + ": image file " +
           (folder / "images" / "a.png").string() + " does not exist"},
      {"train --train-json missing_file.json --out coco",
       "config: COCO training data needs both --train-json and --train-images"},
      {"eval --checkpoint missing", "no checkpoint or run folder 'missing'"},
      {"eval --checkpoint foreign.ckpt",
       "'foreign.ckpt' is not a minidet training checkpoint (it has no 'minidet.config' entry)"},
      {"detect --checkpoint run missing.png --out found", "no image file 'missing.png'"},
      {"detect --checkpoint run", "IMAGES is required (see minidet --help)"},
      {"", "A subcommand is required (see minidet --help)"},
      {"train --threads -1", "--threads: must be >= 0, got -1 (see minidet --help)"},
      {"train --stop-after x", "Could not convert: --stop-after = x (see minidet --help)"},
      {"eval --checkpoint run --batch -1", "--batch: must be >= 0, got -1 (see minidet --help)"},
      {"train --set schedule.lr=abc", "config: schedule.lr must be a number, got \"abc\""},
      {"train --config tiny.json --set detector.num_classes=0 --out zero_classes",
       "config: detector: DetectorConfig: num_classes must be at least 1, got 0"},
      {"train --config tiny.json --set schedule.batch=100 --out big_batch",
       "the training data has 6 images, fewer than one batch of 100"},
      {"train --resume run --config tiny.json", "--resume continues a run with its own config; leave out --config"},
      {"train --resume run --out other", "--resume continues in its own run folder 'run'; leave out --out"},
      {"train --resume missing", "no checkpoint or run folder 'missing'"},
      {"detect --checkpoint run tiny.json --out found",
       "read_image: tiny.json is neither a PNG nor a JPEG file (by its first bytes)"},
      {"detect --checkpoint run a.png --out found --score-threshold 2",
       "--score-threshold: Value 2 not in range 0.000000 to 1.000000 (see minidet --help)"},
      {"detect --checkpoint run picture.png --out found --score-threshold nan",
       "--score-threshold must be in [0, 1], got nan"},
      {"detect --checkpoint run picture.png --out picture.png", "--out picture.png is a file, not a folder"},
      {"detect --checkpoint run picture.png --out ''", "--out: give a folder for the pictures and detections.json"},
      {"detect --checkpoint run images --out found", "no image file 'images'"},
      {"detect --checkpoint run picture.png --out found --resize -5",
       "--resize: must be >= 0, got -5 (see minidet --help)"},
      {"detect --checkpoint tiny.json picture.png --out found",
       "checkpoint tiny.json: not a minidet checkpoint (bad magic number)"},
      {"detect --checkpoint run picture.png --out found --threads 100000",
       "--threads 100000 is more than 1024 (this machine has " + cores + " cores; 0 uses them all)"},
      {"eval --checkpoint run --threads 100000",
       "--threads 100000 is more than 1024 (this machine has " + cores + " cores; 0 uses them all)"},
      {"eval --checkpoint run --out images", "--out images is a folder: give the results file's name"},
      {"eval --checkpoint run --out missing/results.json", "--out missing/results.json: no folder missing"},
      {"eval --checkpoint images", "run folder 'images' has no last.ckpt"},
      {"eval --checkpoint run --val-json images --val-images images", "coco: images is not a file"},
  };
  for (const auto& [arguments, message] : cases) {
    CAPTURE(arguments);
    const Result r = run_minidet(folder, arguments);
    CHECK(r.code != 0);
    CHECK(r.err == "minidet: " + message + "\n");
  }
}

// `minidet eval` has two forms, --checkpoint (run a model) and --gt with --results (score a results file);
// a flag of one form given with the other is refused by name rather than silently ignored. These refusals
// come before any file is opened, so no trained run is needed.
TEST_CASE("errors/minidet: eval takes exactly one of --checkpoint and --results, each with its own flags") {
  const fs::path folder = fresh_folder("eval_forms");
  const std::string running = "--checkpoint (running a model)", scoring = "--results (scoring a results file)";
  const std::string neither =
      "eval needs --checkpoint (run a model over validation data) or --results with --gt (score a COCO results file)";
  // A ground truth of one image and one category, and a results file whose detection names another image.
  write_text(folder / "gt.json", R"({"images": [{"id": 1, "file_name": "a.png", "width": 64, "height": 64}], )"
                                 R"("annotations": [], "categories": [{"id": 1, "name": "thing"}]})");
  write_text(folder / "results.json", R"([{"image_id": 7, "category_id": 1, "bbox": [1, 1, 5, 5], "score": 0.9}])");

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"eval", neither},
      {"eval --gt gt.json", neither},
      {"eval --json", neither},
      {"eval --checkpoint run --results results.json",
       "--checkpoint and --results are the two forms of eval (run a model, or score a results file): give one of them"},
      {"eval --results results.json", "--results needs --gt, the COCO ground-truth file to score it against"},
      {"eval --gt gt.json --results results.json --batch 4", "--batch goes with " + running + ", not with " + scoring},
      {"eval --gt gt.json --results results.json --val-json gt.json",
       "--val-json goes with " + running + ", not with " + scoring},
      {"eval --gt gt.json --results results.json --out scored.json",
       "--out goes with " + running + ", not with " + scoring},
      {"eval --gt gt.json --results results.json --device cpu",
       "--device goes with " + running + ", not with " + scoring},
      {"eval --checkpoint run --gt gt.json", "--gt goes with " + scoring + ", not with " + running},
      {"eval --checkpoint run --voc", "--voc goes with " + scoring + ", not with " + running},
      {"eval --checkpoint run --draw drawn", "--draw goes with " + scoring + ", not with " + running},
      {"eval --gt gt.json --results results.json --images images",
       "--images goes with --draw, the folder for the pictures"},
      {"eval --gt gt.json --results results.json --min-score 0.5",
       "--min-score goes with --draw, the folder for the pictures"},
      {"eval --gt gt.json --results missing.json", "coco results: cannot open missing.json"},
      {"eval --gt gt.json --results results.json",
       "coco results: entry 0 in results.json: image_id 7 is not among the ground-truth images"},
  };
  for (const auto& [arguments, message] : cases) {
    CAPTURE(arguments);
    const Result r = run_minidet(folder, arguments);
    CHECK(r.code != 0);
    CHECK(r.out.empty());
    CHECK(r.err == "minidet: " + message + "\n");
  }
}

TEST_CASE("errors/minidet: a non-finite loss stops the run naming the step and the loss parts") {
  const fs::path folder = fresh_folder("non_finite");
  write_text(folder / "tiny.json", kTinyConfig);
  // A learning rate of 1e12 blows the weights up in the first update, so step 2's losses are NaN.
  const Result r = run_minidet(folder, "train --config tiny.json --device cpu --out run --set schedule.lr=1e12 "
                                       "--set schedule.warmup=0");
  CHECK(r.code == 1);
  CHECK(r.err.rfind("minidet: step 2: the loss is not finite (loss_objectness = nan", 0) == 0);
  CHECK(r.err.find("(run with --detect-anomaly to find the op)\n") != std::string::npos);
}

namespace {

// Copies the run folder `run` to `name` with both checkpoints changed by `edit` (entry name, tensor).
void copy_run_with(const fs::path& folder, const std::string& name,
                   const std::function<void(const std::string&, Tensor&)>& edit) {
  fs::copy(folder / "run", folder / name, fs::copy_options::recursive);
  nn::Checkpoint changed;
  for (auto [entry, t] : nn::load_checkpoint((folder / "run" / "last.ckpt").string()).entries) {
    t = t.clone();
    edit(entry, t);
    changed.put(entry, t);
  }
  for (const char* file : {"last.ckpt", "best.ckpt"}) nn::save_checkpoint((folder / name / file).string(), changed);
}

}  // namespace

TEST_CASE("errors/minidet: a checkpoint holding NaN or Inf is refused by eval, detect and train --resume") {
  const fs::path folder = folder_with_trained_run("non_finite_checkpoint");
  data::write_png(data::Image(40, 30), (folder / "picture.png").string());
  // A NaN in the first weight, at index 5; an Inf in the first Adam moment, at index 0.
  std::string weight, moment;
  int64_t weight_values = 0, moment_values = 0;
  copy_run_with(folder, "nan", [&](const std::string& entry, Tensor& t) {
    if (!weight.empty() || entry.rfind("model.", 0) != 0 || t.dtype() != kFloat32) return;
    weight = entry;
    weight_values = t.numel();
    t.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  });
  copy_run_with(folder, "inf", [&](const std::string& entry, Tensor& t) {
    if (!moment.empty() || entry.find(".exp_avg") == std::string::npos) return;
    moment = entry;
    moment_values = t.numel();
    t.data<float>()[0] = std::numeric_limits<float>::infinity();
  });
  REQUIRE(!weight.empty());
  REQUIRE(!moment.empty());
  const std::string nan_line = "entry '" + weight + "' holds NaN at index 5 (1 of its " +
                               std::to_string(weight_values) + " values are not finite)\n";
  const std::string inf_line = "entry '" + moment + "' holds +Inf at index 0 (1 of its " +
                               std::to_string(moment_values) + " values are not finite)\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"eval --checkpoint nan --device cpu", "minidet: checkpoint nan/best.ckpt: " + nan_line},
      {"detect --checkpoint nan picture.png --out found --device cpu",
       "minidet: checkpoint nan/best.ckpt: " + nan_line},
      {"train --resume nan --device cpu", "minidet: checkpoint nan/last.ckpt: " + nan_line},
      {"eval --checkpoint inf/last.ckpt --device cpu", "minidet: checkpoint inf/last.ckpt: " + inf_line},
      {"train --resume inf --device cpu", "minidet: checkpoint inf/last.ckpt: " + inf_line},
  };
  for (const auto& [arguments, message] : cases) {
    CAPTURE(arguments);
    const Result r = run_minidet(folder, arguments);
    CHECK(r.code == 1);
    CHECK(r.err == message);
  }
  CHECK(!fs::exists(folder / "found"));  // refused before any output
}

TEST_CASE("errors/minidet: train --resume refuses a non-finite or negative learning rate and impossible counters") {
  const fs::path folder = folder_with_trained_run("bad_counters");
  const auto set = [&](const std::string& name, const std::string& target, const Tensor& value) {
    copy_run_with(folder, name, [&](const std::string& entry, Tensor& t) {
      if (entry == target) t = value;
    });
  };
  set("nan_lr", "optim.lr.0", from_vector<double>({std::numeric_limits<double>::quiet_NaN()}));
  set("negative_lr", "optim.lr.0", from_vector<double>({-0.5}));
  set("negative_step", "progress.step", from_vector<int64_t>({-1}));
  set("negative_epoch", "progress.epoch", from_vector<int64_t>({-4}));
  set("float_step", "progress.step", from_vector<double>({2}));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --resume nan_lr",
       "checkpoint nan_lr/last.ckpt: entry 'optim.lr.0' holds NaN at index 0 (1 of its 1 values are not finite)"},
      {"train --resume negative_lr", "checkpoint 'negative_lr/last.ckpt' cannot be resumed (checkpoint: optim.lr.0 "
                                     "is not a finite learning rate >= 0 (-0.5))"},
      {"train --resume negative_step",
       "checkpoint 'negative_step/last.ckpt' cannot be resumed (checkpoint: progress.step is negative (-1))"},
      {"train --resume negative_epoch",
       "checkpoint 'negative_epoch/last.ckpt' cannot be resumed (checkpoint: progress.epoch is negative (-4))"},
      {"train --resume float_step", "checkpoint 'float_step/last.ckpt' cannot be resumed (checkpoint: "
                                    "'progress.step' must be one int64, got (1,) float64)"},
      {"eval --checkpoint negative_step",
       "checkpoint 'negative_step/best.ckpt' cannot be loaded into the model of its own config (checkpoint: "
       "progress.step is negative (-1))"},
  };
  for (const auto& [arguments, message] : cases) {
    CAPTURE(arguments);
    const Result r = run_minidet(folder, arguments + " --device cpu");
    CHECK(r.code == 1);
    CHECK(r.err == "minidet: " + message + "\n");
  }
}

TEST_CASE("errors/minidet: an image or a batch too large for this machine's memory is refused up front") {
  const fs::path folder = folder_with_trained_run("too_large");
  fs::create_directories(folder / "images");
  data::write_png(data::Image(40, 30), (folder / "images" / "a.png").string());
  // A COCO file may declare any size; the check reads it before any pixel (sizes far past any machine's memory).
  write_text(folder / "huge.json", R"({"images": [{"id": 1, "file_name": "a.png", "width": 2000000, "height": )"
                                   R"(1000000}], "annotations": [], "categories": [{"id": 1, "name": "square"}, )"
                                   R"({"id": 2, "name": "circle"}, {"id": 3, "name": "triangle"}]})");
  const std::vector<std::pair<std::string, std::string>> cases = {
      // 1000000 x 750000 float32 pixels alone are 8.4 TiB.
      {"detect --checkpoint run images/a.png --out found --resize 1000000",
       "minidet: detect: images/a.png resized to 1000000 x 750000 pixels needs at least "},
      {"detect --checkpoint run images/a.png --out found --resize 9223372036854775807",
       "minidet: detect: images/a.png resized to "},
      {"eval --checkpoint run --val-json huge.json --val-images images",
       "minidet: eval: an image of 2000000 x 1000000 pixels needs at least "},
  };
  for (const auto& [arguments, start] : cases) {
    CAPTURE(arguments);
    const Result r = run_minidet(folder, arguments + " --device cpu");
    CHECK(r.code == 1);
    CHECK(r.err.rfind(start, 0) == 0);
    CHECK(r.err.find("of memory for the forward pass (the float32 input and the backbone's largest convolution), "
                     "more than this machine's ") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // The same flags at sane sizes run (the image is the only one of the file: resized to 80 x 60).
  const Result fine = run_minidet(folder, "detect --checkpoint run images/a.png --out found --resize 80 --device cpu");
  CHECK_MESSAGE(fine.code == 0, fine.err);
}
