// The subcommands of `minidet`, as plain functions of their parsed options, so main.cpp only declares the
// command line and each command lives in its own file (train.cpp, evaluate.cpp with score_results.cpp,
// detect.cpp, explain.cpp).
// Each returns the process exit code; errors are thrown (minidet::Error) and printed by main as one line.
#pragma once

#include <array>
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

// `minidet eval` has two forms (evaluate.cpp): --checkpoint runs a model over validation data and scores it;
// --results scores a COCO results file that already exists against --gt (score_results.cpp).
struct EvalArgs {
  std::vector<std::string> given;  // the options given on the command line ("--batch", ...), to check the form
  bool json = false;               // end with the JSON line of scores_json (both forms)
  // The --checkpoint form.
  std::string checkpoint;  // a checkpoint or a run folder (its best.ckpt)
  std::string val_json, val_images;
  std::string out;         // the COCO results file; default <checkpoint>.results.json
  std::string device = "auto";
  int threads = 0;
  int64_t batch = 0;       // 0: the schedule's batch
  // The --results form.
  std::string gt, results;  // COCO instances file, COCO results file
  bool voc = false, voc_11_point = false, per_category = false;
  std::string draw;         // folder for pictures of the first images; empty: none
  std::string images;       // the ground truth's image folder; default: the json's name without .json, beside it
  int64_t draw_count = 4;
  double min_score = 0.3;   // detections drawn from this score
};
int run_eval(const EvalArgs& args);
int score_results(const EvalArgs& args);  // the --results form, after run_eval has checked the flags
// The headline numbers as one JSON line, named as metrics.jsonl's eval lines, at %.17g (a double read back
// from it is the same double; -1, undefined, stays -1):
//   {"map50":..,"coco_ap":..,"coco_ap50":..,"coco_ap75":..,"coco_ar100":..}
// map50 is VOC's all-point AP@0.5 (as `minidet train` scores); the rest are the COCO summary's stats[0, 1, 2, 8].
std::string scores_json(double map50, const std::array<double, 12>& coco);

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

// `minidet explain` (explain.cpp): one training step on a held-out image, as the backward explorer's page.
struct ExplainArgs {
  std::string checkpoint;              // a checkpoint or a run folder (its best.ckpt); empty: a fresh detector
  std::string config_path;             // --config, for a fresh detector
  std::vector<std::string> overrides;  // --set, for a fresh detector
  int64_t image_index = 0;             // which held-out image
  uint64_t seed = 0;                   // the step's samplers
  std::string out;                     // the page
  std::string record;                  // the record as JSON
  std::string from_record;             // make the page of this record instead of running a step
  std::string device = "auto";
  int threads = 0;
};
int run_explain(const ExplainArgs& args);

}  // namespace minidet::cli
