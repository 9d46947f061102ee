// What the evaluators compare: ground-truth objects and scored detections, keyed by COCO image and category
// ids (not contiguous labels), so a results file and a ground-truth file can be evaluated as they are.
//
// Rotated boxes (docs/rotated.md): a rotated object or detection keeps its exact box in rotated_box, in the convention
// of data/box/rotated_box.h (radians, normalised), and its bounding box in box, so every tool that reads only `box`
// (where a picture puts its tags, programs written before rotated boxes) still works. The evaluators measure overlap
// with the rotated IoU when the ground truth is rotated (GroundTruth::rotated) or any detection is
// (Detection::rotated); an axis-aligned box then takes part as itself at angle 0 (from_axis_aligned: the same region).
// Otherwise they measure axis-aligned IoU on `box`, exactly as before rotated boxes existed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/box/box.h"
#include "data/box/rotated_box.h"

namespace minidet::data {

class Dataset;

struct Detection {
  int64_t image_id = 0;
  int64_t category_id = 0;
  Box box;  // axis-aligned; for a rotated detection, the bounding box of rotated_box
  double score = 0;
  bool rotated = false;      // rotated_box holds the detection's exact box
  RotatedBox rotated_box{};  // (cx, cy, w, h, angle), angle in radians; unused when rotated is false
};

// A rotated detection: rotated = true, rotated_box = box, and box its bounding box.
Detection rotated_detection(int64_t image_id, int64_t category_id, const RotatedBox& box, double score);

struct GroundTruthObject {
  int64_t id = 0;  // the annotation id (ties and messages only)
  int64_t image_id = 0;
  int64_t category_id = 0;
  Box box;               // axis-aligned; for rotated ground truth, the bounding box of rotated_box
  double area = 0;       // COCO's "area" field (segment area on real COCO, w * h for rotated boxes); selects
                         // small/medium/large
  bool iscrowd = false;  // a crowd region: detections on it are neither right nor wrong
  RotatedBox rotated_box{};  // the exact box when GroundTruth::rotated; unused otherwise
};

struct GroundTruth {
  std::vector<int64_t> image_ids;     // every evaluated image, including those without objects
  std::vector<int64_t> category_ids;  // every category, including those without objects
  std::vector<std::string> category_names;  // parallel to category_ids
  std::vector<GroundTruthObject> objects;
  bool rotated = false;  // every object carries its rotated_box: overlap is rotated IoU
};

// The ground truth of a whole dataset: ids from Dataset::target, categories from Dataset::category_id,
// area = box area, no crowd regions. A rotated dataset (Dataset::rotated) gives rotated objects, area = w * h.
GroundTruth ground_truth_from_dataset(const Dataset& dataset);

}  // namespace minidet::data
