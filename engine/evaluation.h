// Running the detector over a dataset and scoring it: the VOC mAP@0.5 and the COCO AP@[0.5:0.95] summary,
// the numbers every evaluation of `minidet train` and `minidet eval` reports, plus the pictures of a few
// images' detections.
//
// Rotated detectors (docs/rotated.md) go through the same functions: their (D, 5) boxes become rotated
// detections (data::Detection::rotated, with the bounding box in box), score() measures rotated IoU when the
// dataset or the detections are rotated (data/eval/eval_types.h), and the pictures draw rotated outlines.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/dataset/dataset.h"
#include "data/eval/eval_types.h"
#include "data/image/draw.h"
#include "models/faster_rcnn/faster_rcnn.h"

namespace minidet::engine {

struct Scores {
  double map50 = 0;                  // VOC all-point AP at IoU 0.5, mean over classes
  std::array<double, 12> coco{};     // the COCO summary (coco[0] is AP@[0.5:0.95], coco[1] AP50)
  std::vector<std::pair<std::string, double>> class_ap;  // VOC AP per class
  std::string table;                 // the VOC table and the COCO summary lines, ready to print
};

// Detections for every image of `dataset`, in index order, with the dataset's category ids. Switches the
// model to eval() for the pass and restores the previous mode (BatchNorm's statistics follow the mode).
// With num_shards > 1 (data-parallel evaluation), only this shard's images (see data/loader/loader.h).
std::vector<data::Detection> predict(models::FasterRCNN& model, const data::Dataset& dataset, int64_t batch,
                                     int64_t num_shards = 1, int64_t shard_index = 0);
// One image's detections from the model's output: boxes (D, 4) xyxy, or (D, 5) rows (cx, cy, w, h, angle) in
// radians from a rotated detector (told apart by boxes.size(1)); category_of(label) gives each label's COCO
// category id. A rotated row becomes data::rotated_detection (angle normalised in double, box = its
// bounding box, not clipped).
std::vector<data::Detection> detections_of(const models::Detections& found, int64_t image_id,
                                           const std::function<int64_t(int64_t)>& category_of);
// Detections as kPackedDetection numbers each, to send between ranks:
//   (image id, category id, score, rotated, b0, b1, b2, b3, b4)
// with b = (x1, y1, x2, y2, 0) for an axis-aligned detection and (cx, cy, w, h, angle) for a rotated one,
// whose box unpacking recomputes as bounding_box (the value rotated_detection gave it). Ids are integers far
// below 2^53, exact in a double.
constexpr size_t kPackedDetection = 9;
std::vector<double> pack_detections(const std::vector<data::Detection>& detections);
std::vector<data::Detection> unpack_detections(const std::vector<double>& packed);
Scores score(const data::Dataset& dataset, const std::vector<data::Detection>& detections);

// The detections of one image as drawable boxes (labels back from category ids); when any is rotated, all
// carry rotated boxes (an axis-aligned one at angle 0), which draw_detections draws as outlines.
data::LabelledBoxes predictions_of(const data::Dataset& dataset, int64_t image_id,
                                   const std::vector<data::Detection>& detections);
// Draws images 0..count-1 of `dataset` (ground truth in white, predictions above min_score; rotated ones as
// rotated outlines) into `folder`/<file stem>.png; returns the paths written.
std::vector<std::string> draw_examples(const data::Dataset& dataset, const std::vector<data::Detection>& detections,
                                       int64_t count, const std::string& folder, double min_score = 0.5);

}  // namespace minidet::engine
