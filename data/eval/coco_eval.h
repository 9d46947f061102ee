// COCO box evaluation, following the algorithm of pycocotools' COCOeval (iouType "bbox"), rewritten here.
//
// Parameters: IoU thresholds 0.50:0.05:0.95 (T = 10), recall points 0:0.01:1 (R = 101), at most 1, 10 and
// 100 detections per image, and four area ranges on the ground truth's "area": all [0, 1e10],
// small [0, 32²], medium [32², 96²], large [96², 1e10] (ends included).
//
// 1. Per image and category: detections sorted by score (stable) and cut to 100; IoU of every detection with
//    every object, where a crowd object's "IoU" is crowd_overlap (intersection over the detection's area).
//    Both are those of rotated boxes when the ground truth or a detection is rotated (eval_types.h,
//    overlap.h), as detectron2's RotatedCOCOeval does; nothing else changes.
// 2. Per image, category and area range: objects that are crowd or outside the range are "ignored" and
//    sorted after the others (stably). At each IoU threshold t, each detection in score order takes the
//    unmatched object with the highest IoU >= t (a crowd object can be taken many times); once it has a
//    regular candidate it never switches to an ignored one. A detection matched to an ignored object is
//    ignored, and so is an unmatched detection whose own box area (w * h, rotated or not) is outside the range.
// 3. Per category, area range and max-detections M: the first M detections of every image are pooled and
//    sorted by score (stable; images in increasing id order). With the non-ignored objects counted as npig,
//    precision(k) = TP(k) / (TP(k) + FP(k)) and recall(k) = TP(k) / npig; precision is made non-increasing
//    from the right (the envelope) and read at the first k with recall(k) >= each of the 101 recall points
//    (0 beyond the last). The category's recall is the final recall(k). A category with npig = 0 gets -1,
//    which every average below leaves out.
// 4. The summary: 12 numbers, each a mean over the valid entries (> -1):
//      AP @[.5:.95], AP50, AP75, AP small / medium / large   (precision averaged over T, R and categories)
//      AR@1, AR@10, AR@100, AR small / medium / large @100   (recall averaged over T and categories)
#pragma once

#include <array>
#include <string>
#include <vector>

#include "data/eval/eval_types.h"

namespace minidet::data {

struct CocoEvalParams {
  std::vector<double> iou_thresholds;     // 0.5, 0.55, ..., 0.95 (as numpy's linspace computes them)
  std::vector<double> recall_thresholds;  // 0, 0.01, ..., 1
  std::vector<int64_t> max_detections{1, 10, 100};
  std::vector<std::array<double, 2>> area_ranges{{0, 1e10}, {0, 32 * 32}, {32 * 32, 96 * 96}, {96 * 96, 1e10}};
  std::vector<std::string> area_names{"all", "small", "medium", "large"};

  CocoEvalParams();
};

struct CocoEvalResult {
  CocoEvalParams params;
  std::vector<int64_t> category_ids;  // sorted ascending: the K axis
  std::vector<std::string> category_names;
  // precision[t][r][k][a][m] and recall[t][k][a][m], row-major; -1 where a category has no objects.
  std::vector<double> precision;
  std::vector<double> recall;
  std::array<double, 12> stats{};  // the summary, in the order of the header
  bool rotated_iou = false;        // overlap was measured on rotated boxes

  double precision_at(size_t t, size_t r, size_t k, size_t a, size_t m) const;
  double recall_at(size_t t, size_t k, size_t a, size_t m) const;
  // A category's AP (area all, 100 detections), or -1 without objects.
  double category_ap(size_t k) const;
};

CocoEvalResult evaluate_coco(const GroundTruth& ground_truth, const std::vector<Detection>& detections);

// The 12 summary lines exactly as pycocotools prints them.
std::string format_coco_summary(const CocoEvalResult& result);
// One line per category: its id, name and AP.
std::string format_coco_per_category(const CocoEvalResult& result);

}  // namespace minidet::data
