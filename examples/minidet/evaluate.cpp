// `minidet eval`: rebuilds the detector from a checkpoint alone (its embedded config), runs it over the
// validation data (the run's own by default: the synthetic held-out split, or its COCO validation files)
// and prints the VOC table and the COCO summary; the detections go to a COCO results file that
// examples/evaluate or pycocotools can score again.
#include <cstdio>

#include "core/error.h"
#include "data/coco/coco_format.h"
#include "examples/minidet/checkpoints.h"
#include "examples/minidet/commands.h"
#include "examples/minidet/datasets.h"
#include "examples/minidet/evaluation.h"

namespace minidet::cli {

int run_eval(const EvalArgs& args) {
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
  const int64_t batch = args.batch > 0 ? args.batch : checkpoint.config.schedule.batch;
  const std::vector<data::Detection> detections = predict(*model, *val, batch);
  const Scores scores = score(*val, detections);
  const std::string results = args.out.empty() ? checkpoint.path + ".results.json" : args.out;
  data::write_coco_results(detections, results);
  std::printf("%s on %lld images (%s)\n%s\nmAP@0.5 %.4f  COCO AP@[0.5:0.95] %.4f\ndetections   %s\n",
              checkpoint.path.c_str(), static_cast<long long>(val->size()),
              args.val_json.empty() ? (checkpoint.config.data.is_coco() ? checkpoint.config.data.val_json.c_str()
                                                                        : "synthetic held-out split")
                                    : args.val_json.c_str(),
              scores.table.c_str(), scores.map50, scores.coco[0], results.c_str());
  return 0;
}

}  // namespace minidet::cli
