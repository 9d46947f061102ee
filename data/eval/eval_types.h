// What the evaluators compare: ground-truth objects and scored detections, keyed by COCO image and category
// ids (not contiguous labels), so a results file and a ground-truth file can be evaluated as they are.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/box/box.h"

namespace minidet::data {

class Dataset;

struct Detection {
  int64_t image_id = 0;
  int64_t category_id = 0;
  Box box;
  double score = 0;
};

struct GroundTruthObject {
  int64_t id = 0;  // the annotation id (ties and messages only)
  int64_t image_id = 0;
  int64_t category_id = 0;
  Box box;
  double area = 0;       // COCO's "area" field (segment area on real COCO); selects small/medium/large
  bool iscrowd = false;  // a crowd region: detections on it are neither right nor wrong
};

struct GroundTruth {
  std::vector<int64_t> image_ids;     // every evaluated image, including those without objects
  std::vector<int64_t> category_ids;  // every category, including those without objects
  std::vector<std::string> category_names;  // parallel to category_ids
  std::vector<GroundTruthObject> objects;
};

// The ground truth of a whole dataset: ids from Dataset::target, categories from Dataset::category_id,
// area = box area, no crowd regions.
GroundTruth ground_truth_from_dataset(const Dataset& dataset);

}  // namespace minidet::data
