// How the evaluators measure the overlap of a detection with a ground-truth object (eval_types.h says when
// each applies). Internal to data/eval: VOC and COCO share it, so the two algorithms are written once and only
// the measure changes.
//
//   axis-aligned   regular object: box_iou(d.box, g.box); crowd region: crowd_overlap(d.box, g.box)
//                  (data/box/box.h), the measures evaluation always used, bit for bit
//   rotated        regular object: rotated_box_iou(d, g); crowd region: rotated_crowd_overlap(d, g) =
//                  |d ∩ g| / |d| (data/box/rotated_box.h), on the rotated boxes, an axis-aligned one at angle 0
// The rule of detectron2's RotatedCOCOeval.compute_iou_dt_gt (detectron2/evaluation/rotated_coco_evaluation.py):
// rotated when either side is, a 4-number box converted to XYWHA at angle 0. detectron2 asserts that no object
// is a crowd there; minidet keeps pycocotools' crowd rule with the rotated intersection instead.
//
// A detection's own area (COCO's area ranges for unmatched detections) is w * h of its box either way:
// pycocotools' loadRes sets a result's area to bbox[2] * bbox[3], which is the rotated box's w * h for
// detectron2's 5-number bbox (detectron2/evaluation/rotated_coco_evaluation.py keeps that loadRes).
#pragma once

#include <vector>

#include "data/eval/eval_types.h"

namespace minidet::data::eval_detail {

class Overlap {
 public:
  // Rotated when the ground truth or any detection is rotated.
  Overlap(const GroundTruth& ground_truth, const std::vector<Detection>& detections);

  bool rotated() const { return rotated_; }
  // The IoU with a regular object, or the fraction of the detection inside a crowd object.
  double operator()(const Detection& detection, const GroundTruthObject& object) const;
  static double detection_area(const Detection& detection);

 private:
  bool rotated_ = false;
  bool truth_rotated_ = false;
};

}  // namespace minidet::data::eval_detail
