#include "data/eval/overlap.h"

#include <algorithm>

namespace minidet::data::eval_detail {

Overlap::Overlap(const GroundTruth& truth, const std::vector<Detection>& detections)
    : rotated_(truth.rotated || std::any_of(detections.begin(), detections.end(),
                                            [](const Detection& d) { return d.rotated; })),
      truth_rotated_(truth.rotated) {}

double Overlap::operator()(const Detection& detection, const GroundTruthObject& object) const {
  if (!rotated_)
    return object.iscrowd ? crowd_overlap(detection.box, object.box) : box_iou(detection.box, object.box);
  const RotatedBox d = detection.rotated ? detection.rotated_box : from_axis_aligned(detection.box);
  const RotatedBox g = truth_rotated_ ? object.rotated_box : from_axis_aligned(object.box);
  return object.iscrowd ? rotated_crowd_overlap(d, g) : rotated_box_iou(d, g);
}

double Overlap::detection_area(const Detection& detection) {
  if (detection.rotated) return detection.rotated_box.area();
  return detection.box.width() * detection.box.height();
}

}  // namespace minidet::data::eval_detail
