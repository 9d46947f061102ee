// minidet: train, evaluate and run the tiny Faster R-CNN from the command line.
//
//   minidet train  [--config run.json] [--set section.key=value ...] [--device auto|cpu|cuda] [--out DIR]
//   minidet train  --resume DIR
//   minidet eval   --checkpoint DIR_OR_FILE [--val-json J --val-images DIR] [--out results.json] [--json]
//   minidet eval   --gt GT.json --results RES.json [--voc] [--per-category] [--json] [--draw DIR]
//   minidet detect --checkpoint DIR_OR_FILE IMAGES... --out DIR [--score-threshold 0.5]
//   minidet explain [--checkpoint DIR_OR_FILE] [--image-index I] --out step.html [--record step.json]
//
// This file only declares the command line (CLI11); each subcommand lives in its own file. Every error,
// ours or the library's, ends here as one line "minidet: <what went wrong>" and a non-zero exit, never a
// crash or a stack of messages.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <new>
#include <string>

#include "core/allocator.h"
#include "core/error.h"
#include "examples/minidet/commands.h"

using namespace minidet;

namespace {

// CLI11's NonNegativeNumber spells its upper bound, DBL_MAX, out in full (300 digits) when it refuses a
// value; this says the rule in words: "--threads: must be >= 0, got -1".
const CLI::Validator kNonNegative(
    [](std::string& value) {
      try {
        if (std::stod(value) >= 0) return std::string();
      } catch (const std::exception&) {
        return std::string();  // not a number: the option's own conversion says so
      }
      return "must be >= 0, got " + value;
    },
    "NUMBER >= 0");

void add_device_options(CLI::App* command, std::string& device, int& threads) {
  command->add_option("--device", device, "auto (the GPU when there is one), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  command->add_option("--threads", threads, "CPU threads (OpenMP); 0: all cores")->check(kNonNegative);
}

// The one error line. On a terminal, end the live progress line first so the message starts a line.
void report(const std::string& message) {
  if (isatty(fileno(stdout))) std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr, "minidet: %s\n", message.c_str());
}

CLI::App* add_train_command(CLI::App& app, cli::TrainArgs& train, uint64_t& seed, CLI::Option*& seed_option) {
  CLI::App* train_command = app.add_subcommand(
      "train", "Train on the synthetic shapes (default) or a COCO dataset; writes a run folder with config.json, "
               "metrics.jsonl, loss.png, map.png, detections/ and last/best checkpoints");
  train_command->add_option("--config", train.config_path, "run config JSON: schedule, data and detector sections")
      ->check(CLI::ExistingFile);
  train_command->add_option("--set", train.overrides,
                            "override a config key, e.g. --set schedule.steps=300 "
                            "--set detector.rpn.train.post_nms_top_n=500 (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_device_options(train_command, train.device, train.threads);
  seed_option = train_command->add_option("--seed", seed, "same as --set schedule.seed=N");
  train_command->add_option("--out", train.out, "run folder (default runs/<YYYYmmdd-HHMMSS>)");
  train_command->add_option("--resume", train.resume, "continue the run in this folder (or from this checkpoint)");
  train_command->add_option("--stop-after", train.stop_after,
                            "stop after this step as Ctrl-C would (checkpoint, exit 0), to split a run")
      ->check(kNonNegative);
  train_command->add_flag("--detect-anomaly", train.detect_anomaly,
                          "name the op that produced a NaN/Inf gradient (slow; for debugging)");
  train_command->add_option("--dist-timeout", train.dist_timeout,
                            "under mpirun: seconds a rank may wait for the others in one collective before the "
                            "job stops with an error naming the rank and the operation (0: wait forever)")
      ->check(CLI::NonNegativeNumber);
  train_command->add_option("--train-json", train.train_json, "COCO instances file of the training data");
  train_command->add_option("--train-images", train.train_images, "folder of the training images");
  train_command->add_option("--val-json", train.val_json, "COCO instances file of the validation data");
  train_command->add_option("--val-images", train.val_images, "folder of the validation images");
  train_command->footer(
      "Examples:\n"
      "  minidet train                                   default config: 3 to 10 minutes on a 2-core CPU (AVX-512 or not), seconds on a GPU\n"
      "  minidet train --set schedule.steps=100 --out runs/short\n"
      "  minidet train --resume runs/short --set schedule.steps=300    continue, and train longer\n"
      "  mpirun -np 2 minidet train --out runs/two    data parallel: each rank trains on half of every batch\n"
      "  minidet train --train-json train.json --train-images train/ --val-json val.json --val-images val/");
  return train_command;
}

// Two forms: a checkpoint run over validation data, or a COCO results file scored against its ground truth.
CLI::App* add_eval_command(CLI::App& app, cli::EvalArgs& eval) {
  CLI::App* eval_command = app.add_subcommand(
      "eval", "Evaluate a checkpoint (VOC mAP@0.5 per class, the COCO summary, and a COCO results json), or "
              "score an existing COCO results file with --gt and --results");
  eval_command->add_option("--checkpoint", eval.checkpoint, "a checkpoint, or a run folder (its best.ckpt)");
  eval_command->add_option("--val-json", eval.val_json, "COCO instances file (default: the run's validation data)");
  eval_command->add_option("--val-images", eval.val_images, "folder of the validation images");
  eval_command->add_option("--out", eval.out, "COCO results file (default <checkpoint>.results.json)");
  eval_command->add_option("--batch", eval.batch, "images per forward pass (default: the run's batch)")
      ->check(kNonNegative);
  add_device_options(eval_command, eval.device, eval.threads);
  eval_command->add_option("--results", eval.results, "score this COCO results file instead of a checkpoint");
  eval_command->add_option("--gt", eval.gt, "with --results: the ground-truth COCO instances file");
  eval_command->add_flag("--voc", eval.voc, "with --results: also print VOC AP@0.5 per class and the mAP");
  eval_command->add_flag("--voc-11-point", eval.voc_11_point, "with --results: VOC2007's 11-point interpolation");
  eval_command->add_flag("--per-category", eval.per_category, "with --results: print COCO AP per category");
  eval_command->add_option("--draw", eval.draw, "with --results: save pictures of the first images here");
  eval_command->add_option("--images", eval.images,
                           "with --draw: the ground truth's image folder (default: the json's name without .json, "
                           "beside it)");
  eval_command->add_option("--draw-count", eval.draw_count, "with --draw: how many images to draw (default 4)")
      ->check(kNonNegative);
  eval_command->add_option("--min-score", eval.min_score, "with --draw: detections drawn from this score")
      ->capture_default_str();
  eval_command->add_flag("--json", eval.json,
                         "end with a JSON line of mAP@0.5 and the COCO AP/AR at full precision (both forms)");
  eval_command->footer(
      "Examples:\n"
      "  minidet eval --checkpoint runs/NAME --json      run best.ckpt over the run's validation data\n"
      "  minidet eval --checkpoint runs/NAME --val-json val.json --val-images val/ --out results.json\n"
      "  minidet eval --gt shapes/test.json --results results.json --voc --per-category\n"
      "  minidet eval --gt shapes/test.json --results results.json --draw drawn --draw-count 8");
  return eval_command;
}

CLI::App* add_detect_command(CLI::App& app, cli::DetectArgs& detect) {
  CLI::App* detect_command = app.add_subcommand(
      "detect", "Detect objects in PNG/JPEG images: pictures with boxes, class names and scores, and "
                "detections.json (COCO results)");
  detect_command->add_option("--checkpoint", detect.checkpoint, "a checkpoint, or a run folder (its best.ckpt)")
      ->required();
  detect_command->add_option("IMAGES", detect.images, "image files (PNG or JPEG)")->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  detect_command->add_option("--out", detect.out, "output folder")->required();
  detect_command->add_option("--score-threshold", detect.score_threshold, "keep detections scoring at least this")
      ->check(CLI::Range(0.0, 1.0));
  detect_command->add_option("--resize", detect.resize,
                             "scale images so the longer side has this many pixels (0: as they are)")
      ->check(kNonNegative);
  add_device_options(detect_command, detect.device, detect.threads);
  return detect_command;
}

CLI::App* add_explain_command(CLI::App& app, cli::ExplainArgs& explain) {
  CLI::App* command = app.add_subcommand(
      "explain", "One training step of a detector on a held-out image, as a page that plays its backward pass "
                 "node by node (the backward explorer)");
  command->add_option("--checkpoint", explain.checkpoint,
                      "a checkpoint, or a run folder (its best.ckpt); without it, a fresh detector");
  command->add_option("--config", explain.config_path, "run config JSON of a fresh detector")->check(CLI::ExistingFile);
  command->add_option("--set", explain.overrides, "override a config key of a fresh detector (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option("--image-index", explain.image_index, "which held-out image (from 0)")->check(kNonNegative);
  command->add_option("--seed", explain.seed, "seed of the step's samplers");
  command->add_option("--out", explain.out, "the page (HTML, self-contained)");
  command->add_option("--record", explain.record, "also write the record behind the page (JSON)");
  command->add_option("--from-record", explain.from_record, "make the page of a record written by --record")
      ->check(CLI::ExistingFile);
  add_device_options(command, explain.device, explain.threads);
  command->footer(
      "Examples:\n"
      "  minidet explain --checkpoint runs/NAME --out step.html          a trained detector's step\n"
      "  minidet explain --out fresh.html --image-index 3                 a fresh detector's step\n"
      "  minidet explain --checkpoint runs/NAME --record step.json        on a machine without Graphviz\n"
      "  minidet explain --from-record step.json --out step.html          ...and the page elsewhere");
  return command;
}

}  // namespace

int main(int argc, char** argv) {
  minidet::retain_freed_host_memory();  // a training step reuses the same large buffers (core/allocator.h)
  CLI::App app{"minidet: train, evaluate and run the tiny Faster R-CNN (see README.md)", "minidet"};
  app.require_subcommand(1);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a later flag wins
  cli::TrainArgs train;
  uint64_t seed = 0;
  CLI::Option* seed_option = nullptr;
  CLI::App* train_command = add_train_command(app, train, seed, seed_option);
  cli::EvalArgs eval;
  CLI::App* eval_command = add_eval_command(app, eval);
  cli::DetectArgs detect;
  CLI::App* detect_command = add_detect_command(app, detect);
  cli::ExplainArgs explain;
  add_explain_command(app, explain);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
    std::fprintf(stderr, "minidet: %s (see minidet --help)\n", e.what());
    return 2;
  }

  try {
    if (*train_command) {
      if (seed_option->count() > 0) train.overrides.push_back("schedule.seed=" + std::to_string(seed));
      return cli::run_train(train);
    }
    if (*eval_command) {
      for (const CLI::Option* option : eval_command->get_options())
        if (option->count() > 0) eval.given.push_back(option->get_name());
      return cli::run_eval(eval);
    }
    if (*detect_command) return cli::run_detect(detect);
    return cli::run_explain(explain);
  } catch (const Error& e) {
    report(e.message());
  } catch (const std::bad_alloc&) {
    // What the up-front checks (inference_memory.h) could not foresee, e.g. an image file of enormous size.
    report("out of memory (std::bad_alloc): the data, batch or model is too large for this machine");
  } catch (const std::exception& e) {
    report(e.what());
  }
  return 1;
}
