// The three subcommands of `minidet`, as plain functions of their parsed options, so main.cpp only
// declares the command line and each command lives in its own file (train.cpp, evaluate.cpp, detect.cpp).
// Each returns the process exit code; errors are thrown (minidet::Error) and printed by main as one line.
#pragma once

#include <string>
#include <vector>

namespace minidet::engine {}

namespace minidet::cli {

// The commands are written over the training engine (engine/): its RunConfig, Trainer, evaluation and
// checkpoints are named here without the prefix.
using namespace minidet::engine;

struct TrainArgs {
  std::string config_path;             // --config
  std::vector<std::string> overrides;  // --set, in order
  std::string device = "auto";
  int threads = 0;                     // 0: OpenMP's default
  std::string out;                     // run folder; default runs/<YYYYmmdd-HHMMSS>
  std::string resume;                  // a run folder or a checkpoint
  int64_t stop_after = 0;              // stop (as Ctrl-C would, exit 0) after this step; 0: never
  bool detect_anomaly = false;
  double dist_timeout = 600;           // under mpirun: seconds a collective may wait before all ranks stop
  std::string train_json, train_images, val_json, val_images;
};
int run_train(const TrainArgs& args);

struct EvalArgs {
  std::string checkpoint;  // a checkpoint or a run folder (its best.ckpt)
  std::string val_json, val_images;
  std::string out;         // the COCO results file; default <checkpoint>.results.json
  std::string device = "auto";
  int threads = 0;
  int64_t batch = 0;       // 0: the schedule's batch
};
int run_eval(const EvalArgs& args);

struct DetectArgs {
  std::string checkpoint;
  std::vector<std::string> images;
  std::string out;                 // folder for the pictures and detections.json
  double score_threshold = 0.5;
  int64_t resize = 0;              // scale each image so its longer side is this many pixels; 0: as it is
  std::string device = "auto";
  int threads = 0;
};
int run_detect(const DetectArgs& args);

}  // namespace minidet::cli
