// `minidet eval`, the one evaluation program, in two forms; exactly one of --checkpoint and --results is given:
//
//   minidet eval --checkpoint DIR_OR_FILE [--val-json J --val-images DIR] [--out results.json] [--json]
//     rebuilds the detector from a checkpoint alone (its embedded config), runs it over the validation data
//     (the run's own by default: the synthetic held-out split, or its COCO validation files) and prints the
//     VOC table and the COCO summary; the detections go to a COCO results file that the --results form or
//     pycocotools can score again (a rotated detector's as detectron2's XYWHA boxes, scored with rotated
//     IoU, engine/evaluation.h).
//   minidet eval --gt GT.json --results RES.json [--voc] [--per-category] [--json] [--draw DIR ...]
//     scores a COCO results file that already exists, with no model (score_results.cpp).
//
// Each form's flags are refused with the other, by name, rather than ignored: a --batch given with --results
// would otherwise look as if it had been used. --json (both forms) ends with the same JSON line of the
// headline numbers (scores_json), so a script reads either form the same way.
//
// On a GPU the backbone's and the RPN head's forward passes replay as CUDA graphs (engine/cuda_graphs.h), as
// in the training run's own evaluations, unless the run's config turned schedule.cuda_graphs off: the same
// kernels on the same values, launched at once for every batch of a shape already seen twice. (`minidet
// detect` keeps eager calls: each image there is its own shape, which a graph would first warm up twice.)
//
// What would fail late fails first, in one line: an --out that cannot be written, and a --batch whose forward
// pass cannot fit in this machine's memory (inference_memory.h; batches are padded to their largest image).
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "data/coco/coco_format.h"
#include "engine/checkpoints.h"
#include "engine/cuda_graphs.h"
#include "engine/datasets.h"
#include "engine/evaluation.h"
#include "examples/minidet/commands.h"
#include "examples/minidet/inference_memory.h"

namespace minidet::cli {

namespace {

// The largest batch predict() will build: `batch` images at a time in dataset order, each padded to its
// batch's largest height and width (data/loader/loader.h), measured from the annotations alone.
void check_batches_fit(const models::BackboneOptions& backbone, Device device, const data::Dataset& val,
                       int64_t batch) {
  struct Shape {
    double images = 0, height = 0, width = 0, bytes = -1;
  } worst;
  for (int64_t first = 0; first < val.size(); first += batch) {
    Shape shape;
    shape.images = static_cast<double>(std::min(batch, val.size() - first));
    for (int64_t i = first; i < first + static_cast<int64_t>(shape.images); ++i) {
      const data::Target target = val.target(i);
      shape.height = std::max(shape.height, static_cast<double>(target.height));
      shape.width = std::max(shape.width, static_cast<double>(target.width));
    }
    shape.bytes = inference_bytes(backbone, device, shape.images, shape.height, shape.width);
    if (shape.bytes > worst.bytes) worst = shape;
  }
  if (worst.bytes < 0) return;
  char what[128];
  if (worst.images > 1)
    std::snprintf(what, sizeof what, "eval: a batch of %.0f images of %.0f x %.0f pixels", worst.images, worst.width,
                  worst.height);
  else
    std::snprintf(what, sizeof what, "eval: an image of %.0f x %.0f pixels", worst.width, worst.height);
  check_inference_memory(backbone, device, worst.images, worst.height, worst.width, what,
                         worst.images > 1 ? "use a smaller --batch" : "scale the validation images down");
}

// Which form the given flags ask for (true: --results), or one line saying what is wrong with them.
bool results_form(const EvalArgs& args) {
  const auto given = [&](const std::string& name) {
    return std::find(args.given.begin(), args.given.end(), name) != args.given.end();
  };
  const bool checkpoint = given("--checkpoint"), results = given("--results");
  MINIDET_CHECK(!(checkpoint && results),
                "--checkpoint and --results are the two forms of eval (run a model, or score a results file): "
                "give one of them");
  MINIDET_CHECK(checkpoint || results,
                "eval needs --checkpoint (run a model over validation data) or --results with --gt "
                "(score a COCO results file)");
  const std::vector<std::string> checkpoint_only = {"--val-json", "--val-images", "--out", "--batch", "--device",
                                                    "--threads"};
  const std::vector<std::string> results_only = {"--gt", "--voc", "--voc-11-point", "--per-category", "--draw",
                                                 "--images", "--draw-count", "--min-score"};
  const char* const running = "--checkpoint (running a model)";
  const char* const scoring = "--results (scoring a results file)";
  for (const std::string& name : results ? checkpoint_only : results_only)
    MINIDET_CHECK(!given(name), name, " goes with ", results ? running : scoring, ", not with ",
                  results ? scoring : running);
  if (!results) return false;
  MINIDET_CHECK(given("--gt"), "--results needs --gt, the COCO ground-truth file to score it against");
  for (const char* name : {"--images", "--draw-count", "--min-score"})
    MINIDET_CHECK(!given(name) || given("--draw"), name, " goes with --draw, the folder for the pictures");
  return true;
}

// The --checkpoint form.
int run_checkpoint(const EvalArgs& args) {
  set_threads(args.threads);
  MINIDET_CHECK(args.val_json.empty() == args.val_images.empty(), "--val-json and --val-images go together");
  const Device device = pick_device(args.device);
  const RunCheckpoint checkpoint = load_run_checkpoint(checkpoint_path(args.checkpoint, true));
  std::unique_ptr<models::FasterRCNN> model = load_model(checkpoint, device);

  std::unique_ptr<data::Dataset> val;
  if (!args.val_json.empty()) {
    val = open_coco_validation(checkpoint.config, args.val_json, args.val_images);
  } else {
    val = std::move(open_datasets(checkpoint.config, false).val);
  }
  const std::string results = args.out.empty() ? checkpoint.path + ".results.json" : args.out;
  namespace fs = std::filesystem;
  MINIDET_CHECK(!fs::is_directory(results), "--out ", results, " is a folder: give the results file's name");
  const fs::path folder = fs::path(results).parent_path();
  MINIDET_CHECK(folder.empty() || fs::is_directory(folder), "--out ", results, ": no folder ", folder.string());
  const int64_t batch = args.batch > 0 ? args.batch : checkpoint.config.schedule.batch;
  check_batches_fit(model->config().backbone, device, *val, batch);
  std::unique_ptr<engine::CudaGraphs> graphs;
  if (device.is_cuda() && checkpoint.config.schedule.cuda_graphs) graphs = std::make_unique<engine::CudaGraphs>(*model);
  const std::vector<data::Detection> detections = predict(*model, *val, batch);
  const Scores scores = score(*val, detections);
  data::write_coco_results(detections, results);
  std::printf("%s on %lld images (%s)\n%s\nmAP@0.5 %.4f  COCO AP@[0.5:0.95] %.4f\ndetections   %s\n",
              checkpoint.path.c_str(), static_cast<long long>(val->size()),
              args.val_json.empty() ? (checkpoint.config.data.is_coco() ? checkpoint.config.data.val_json.c_str()
                                                                        : "synthetic held-out split")
                                    : args.val_json.c_str(),
              scores.table.c_str(), scores.map50, scores.coco[0], results.c_str());
  if (args.json) std::printf("%s\n", scores_json(scores.map50, scores.coco).c_str());
  return 0;
}

}  // namespace

int run_eval(const EvalArgs& args) {
  return results_form(args) ? score_results(args) : run_checkpoint(args);
}

}  // namespace minidet::cli
