// Running the detector over a dataset and scoring it: the VOC mAP@0.5 and the COCO AP@[0.5:0.95] summary,
// the numbers every evaluation of `minidet train` and `minidet eval` reports, plus the pictures of a few
// images' detections.
#pragma once

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
// Detections as 7 numbers each (image id, category id, x1, y1, x2, y2, score), to send between ranks.
std::vector<double> pack_detections(const std::vector<data::Detection>& detections);
std::vector<data::Detection> unpack_detections(const std::vector<double>& packed);
Scores score(const data::Dataset& dataset, const std::vector<data::Detection>& detections);

// The detections of one image as drawable boxes (labels back from category ids).
data::LabelledBoxes predictions_of(const data::Dataset& dataset, int64_t image_id,
                                   const std::vector<data::Detection>& detections);
// Draws images 0..count-1 of `dataset` (ground truth in white, predictions above min_score) into
// `folder`/<file stem>.png; returns the paths written.
std::vector<std::string> draw_examples(const data::Dataset& dataset, const std::vector<data::Detection>& detections,
                                       int64_t count, const std::string& folder, double min_score = 0.5);

}  // namespace minidet::engine
