// `minidet eval --gt GT.json --results RES.json`: scores a COCO results file that already exists (written by
// `minidet eval --checkpoint`, `minidet detect`, the torchvision twin of bench/detector_torch.py, or any other
// detector) against a COCO ground-truth file, with no model. It prints the file sizes and then pycocotools'
// 12-line bbox summary, line for line as COCOeval.summarize() prints it (pycocotools/cocoeval.py;
// data/eval/coco_eval.h follows COCOeval.evaluate / accumulate step by step):
//   --voc, --voc-11-point  VOC AP@0.5 per class and the mean (data/eval/voc_eval.h; 11-point is VOC2007's rule)
//   --per-category         COCO AP per category
//   --json                 one JSON line of the headline numbers at full precision (scores_json, commands.h),
//                          the same line the --checkpoint form prints, for scripts
//   --draw DIR             pictures of the first --draw-count images: ground truth in white, detections from
//                          --min-score in class colours
//
// Rotated files (detectron2's XYWHA bbox [cx, cy, w, h, angle in degrees], data/coco/coco_format.h) are
// scored with rotated IoU, as detectron2's RotatedCOCOeval does: a rotated ground-truth file, or rotated
// results against an axis-aligned one (its boxes then at angle 0); a line before the summary says so.
//
//   minidet eval --gt /tmp/shapes/test.json --results /tmp/shapes/fake_results.json --voc --json
//   minidet eval --gt gt.json --results res.json --draw /tmp/drawn --images /tmp/shapes/test --draw-count 8
//
// Why not engine::score(), as the --checkpoint form does: it takes a Dataset, which opens every image file,
// and sees the ground truth as training does (area = box area, no crowd regions). Scoring a file needs only the
// two json files, and must see the ground truth as the file has it, crowd flags and areas included
// (ground_truth_from_coco), as pycocotools does. The pictures do need the images, and reuse
// engine::draw_examples.
#include <cstdio>
#include <filesystem>

#include "data/coco/coco_dataset.h"
#include "data/coco/coco_format.h"
#include "data/eval/coco_eval.h"
#include "data/eval/voc_eval.h"
#include "engine/evaluation.h"
#include "examples/minidet/commands.h"

namespace minidet::cli {

std::string scores_json(double map50, const std::array<double, 12>& coco) {
  char line[512];
  std::snprintf(line, sizeof line,
                "{\"map50\":%.17g,\"coco_ap\":%.17g,\"coco_ap50\":%.17g,\"coco_ap75\":%.17g,\"coco_ar100\":%.17g}",
                map50, coco[0], coco[1], coco[2], coco[8]);
  return line;
}

int score_results(const EvalArgs& args) {
  const data::CocoInstances instances = data::read_coco_instances(args.gt);
  const std::vector<data::Detection> detections = data::read_coco_results(args.results, &instances);
  const data::GroundTruth truth = data::ground_truth_from_coco(instances);
  std::printf("%zu images, %zu annotations, %zu categories, %zu detections\n", instances.images.size(),
              instances.annotations.size(), instances.categories.size(), detections.size());
  if (instances.clipped_boxes > 0)
    std::printf("note: %lld ground-truth boxes were clipped to their images\n",
                static_cast<long long>(instances.clipped_boxes));
  const data::CocoEvalResult coco = data::evaluate_coco(truth, detections);
  if (coco.rotated_iou)
    std::printf("rotated boxes (%s): overlap is rotated IoU\n",
                truth.rotated ? "the ground truth's XYWHA bboxes" : "the results' XYWHA bboxes");
  std::printf("%s", data::format_coco_summary(coco).c_str());
  if (args.per_category) std::printf("%s", data::format_coco_per_category(coco).c_str());
  if (args.voc || args.voc_11_point) {
    data::VocOptions options;
    options.use_11_point = args.voc_11_point;
    std::printf("%s", data::format_voc(data::evaluate_voc(truth, detections, options), options).c_str());
  }
  if (args.json)  // map50 is always the all-point AP, whatever --voc-11-point says, as `minidet train` logs it
    std::printf("%s\n", scores_json(data::evaluate_voc(truth, detections).mean_average_precision, coco.stats).c_str());
  if (!args.draw.empty()) {
    // export_shapes_coco's layout: <out>/test.json with its images in <out>/test/.
    namespace fs = std::filesystem;
    const std::string images =
        args.images.empty() ? (fs::path(args.gt).parent_path() / fs::path(args.gt).stem()).string() : args.images;
    const data::CocoDataset dataset(args.gt, images);
    const std::vector<std::string> drawn =
        engine::draw_examples(dataset, detections, args.draw_count, args.draw, args.min_score);
    for (const std::string& path : drawn) std::printf("drew %s\n", path.c_str());
  }
  return 0;
}

}  // namespace minidet::cli
