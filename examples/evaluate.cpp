// The evaluate command: reads a COCO ground-truth file and a COCO results file and prints pycocotools'
// 12-line box summary; --voc adds VOC AP@0.5 per class and the mAP; --draw saves pictures of the first
// images with ground truth (white) and detections (class colours); --json ends with one JSON line of the
// headline numbers at full precision, under the names of metrics.jsonl's eval lines (map50 is VOC's
// all-point AP@0.5, as `minidet train` scores), for scripts such as bench/detector_torch.py:
//   {"map50":0.9039..,"coco_ap":0.549..,"coco_ap50":..,"coco_ap75":..,"coco_ar100":..}
//
//   evaluate --gt /tmp/shapes/test.json --results /tmp/shapes/fake_results.json --voc
//   evaluate --gt gt.json --results res.json --draw /tmp/drawn --images /tmp/shapes/test --draw-count 8
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <unordered_map>

#include "data/coco/coco_dataset.h"
#include "data/coco/coco_format.h"
#include "data/eval/coco_eval.h"
#include "data/eval/voc_eval.h"
#include "data/image/draw.h"
#include "data/image/image_io.h"

using namespace minidet::data;

namespace {

void draw_images(const std::string& gt_path, const std::string& image_dir, const std::string& out_dir, int count,
                 const std::vector<Detection>& detections, double min_score) {
  const CocoDataset dataset(gt_path, image_dir);
  std::filesystem::create_directories(out_dir);
  std::unordered_map<int64_t, LabelledBoxes> predicted;
  for (const Detection& d : detections) {
    LabelledBoxes& boxes = predicted[d.image_id];
    boxes.boxes.push_back(d.box);
    boxes.labels.push_back(dataset.label_of_category(d.category_id));
    boxes.scores.push_back(d.score);
  }
  DrawOptions options;
  options.min_score = min_score;
  for (int64_t index = 0; index < std::min<int64_t>(count, dataset.size()); ++index) {
    const Sample sample = dataset.get(index);
    const LabelledBoxes truth{sample.boxes, sample.labels, {}};
    const Image picture = draw_detections(sample.image, truth, predicted[sample.image_id], dataset.class_names(), options);
    const std::string path = (std::filesystem::path(out_dir) / ("detections_" + std::to_string(sample.image_id) + ".png")).string();
    write_png(picture, path);
    std::printf("drew %s\n", path.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Evaluate COCO-format detections (pycocotools' bbox summary, optional VOC mAP)"};
  std::string gt_path, results_path, draw_dir, image_dir;
  bool voc = false, voc_11_point = false, per_category = false, json = false;
  int draw_count = 4;
  double min_score = 0.3;
  app.add_option("--gt", gt_path, "ground-truth COCO instances json")->required();
  app.add_option("--results", results_path, "COCO results json")->required();
  app.add_flag("--voc", voc, "also print VOC AP@0.5 per class and the mAP");
  app.add_flag("--voc-11-point", voc_11_point, "use VOC2007's 11-point interpolation");
  app.add_flag("--per-category", per_category, "print COCO AP per category");
  app.add_flag("--json", json, "end with a JSON line of mAP@0.5 and COCO AP, full precision");
  app.add_option("--draw", draw_dir, "save pictures of the first images here");
  app.add_option("--images", image_dir, "image folder of the ground truth (default: the json's name without .json, beside it)");
  app.add_option("--draw-count", draw_count, "how many images to draw")->capture_default_str();
  app.add_option("--min-score", min_score, "detections drawn from this score")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    const CocoInstances instances = read_coco_instances(gt_path);
    const std::vector<Detection> detections = read_coco_results(results_path, &instances);
    const GroundTruth truth = ground_truth_from_coco(instances);
    std::printf("%zu images, %zu annotations, %zu categories, %zu detections\n", instances.images.size(),
                instances.annotations.size(), instances.categories.size(), detections.size());
    if (instances.clipped_boxes > 0)
      std::printf("note: %lld ground-truth boxes were clipped to their images\n",
                  static_cast<long long>(instances.clipped_boxes));
    const CocoEvalResult coco = evaluate_coco(truth, detections);
    std::printf("%s", format_coco_summary(coco).c_str());
    if (per_category) std::printf("%s", format_coco_per_category(coco).c_str());
    if (voc || voc_11_point) {
      VocOptions options;
      options.use_11_point = voc_11_point;
      std::printf("%s", format_voc(evaluate_voc(truth, detections, options), options).c_str());
    }
    if (json) {
      // %.17g: a double read back from this text is the same double. -1 (undefined) stays -1.
      const double map50 = evaluate_voc(truth, detections).mean_average_precision;
      std::printf("{\"map50\":%.17g,\"coco_ap\":%.17g,\"coco_ap50\":%.17g,\"coco_ap75\":%.17g,"
                  "\"coco_ar100\":%.17g}\n",
                  map50, coco.stats[0], coco.stats[1], coco.stats[2], coco.stats[8]);
    }
    if (!draw_dir.empty()) {
      // export_shapes_coco's layout: <out>/test.json with its images in <out>/test/.
      if (image_dir.empty()) image_dir = (std::filesystem::path(gt_path).parent_path() / std::filesystem::path(gt_path).stem()).string();
      draw_images(gt_path, image_dir, draw_dir, draw_count, detections, min_score);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "evaluate: %s\n", error.what());
    return 1;
  }
  return 0;
}
