// PASCAL VOC evaluation: average precision per class at one IoU threshold (0.5), and their mean (mAP).
//
// Per class, detections are sorted by score (highest first; a stable sort, so ties keep input order) and
// walked once. A detection matches the ground-truth object of its image and class with the highest IoU;
// it is a true positive when that IoU is > threshold (strictly, as in VOC's code) and the object is not yet
// taken, and a false positive otherwise (a duplicate, a poor box, an image without that class).
// Crowd regions play VOC's "difficult" role: a detection that matches no regular object but covers a crowd
// region (crowd_overlap > threshold, see data/box/box.h) is neither true nor false, and crowd regions do
// not count as objects to find.
//
// With the cumulative precision p(k) and recall r(k) after k detections:
//   all-point AP (VOC 2010+)   the area under the precision envelope p̂(r) = max_{r' >= r} p(r'), summed
//                              over the recall steps: sum_k (r(k) - r(k-1)) * p̂(r(k))
//   11-point AP (VOC 2007)     (1/11) sum_{t in 0, 0.1, ..., 1} max_{r(k) >= t} p(k)   (0 when no r(k) >= t)
// A class without ground truth has no AP: it is reported as -1 and left out of the mAP.
// IoU and crowd_overlap are those of rotated boxes when the ground truth or a detection is rotated
// (eval_types.h, overlap.h); nothing else changes.
#pragma once

#include <string>
#include <vector>

#include "data/eval/eval_types.h"

namespace minidet::data {

struct VocOptions {
  double iou_threshold = 0.5;
  bool use_11_point = false;
};

struct VocClassResult {
  int64_t category_id = 0;
  std::string name;
  int64_t num_ground_truth = 0;  // regular (non-crowd) objects
  int64_t num_detections = 0;
  double average_precision = -1;
  std::vector<double> precision;  // after each detection, in score order (ignored ones left out)
  std::vector<double> recall;
};

struct VocResult {
  std::vector<VocClassResult> classes;  // in ground_truth.category_ids order
  double mean_average_precision = -1;   // over classes with ground truth; -1 when there are none
  bool rotated_iou = false;             // overlap was measured on rotated boxes
};

VocResult evaluate_voc(const GroundTruth& ground_truth, const std::vector<Detection>& detections,
                       const VocOptions& options = {});
// AP from a precision/recall curve (recall non-decreasing), by either rule above.
double voc_average_precision(const std::vector<double>& recall, const std::vector<double>& precision,
                             bool use_11_point);
// A table: one line per class (name, objects, detections, AP) and the mAP.
std::string format_voc(const VocResult& result, const VocOptions& options = {});

}  // namespace minidet::data
