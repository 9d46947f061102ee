#include "models/roi_heads/roi_inputs.h"

#include <cmath>

#include "ops/common/checks.h"

namespace minidet::models::detail {

void check_targets_shapes(const char* op, const std::vector<Tensor>& proposals, const std::vector<Tensor>& gt_boxes,
                          const std::vector<Tensor>& gt_labels) {
  MINIDET_CHECK(gt_boxes.size() == proposals.size() && gt_labels.size() == proposals.size(), op,
                ": expected one gt_boxes and one gt_labels tensor per image (", proposals.size(), " images), got ",
                gt_boxes.size(), " and ", gt_labels.size());
  for (size_t n = 0; n < proposals.size(); ++n) {
    const Tensor &b = gt_boxes[n], &l = gt_labels[n];
    MINIDET_CHECK(b.defined() && l.defined(), op, ": gt_boxes[", n, "] or gt_labels[", n, "] is undefined");
    const int64_t d = proposals[0].size(1);  // 4 or 5: the proposals' box type (check_proposal_list)
    MINIDET_CHECK(b.dim() == 2 && b.size(1) == d, op, ": expected gt_boxes[", n, "] of shape (M, ", d, "), got ",
                  b.sizes());
    ops::check_same_dtype(op, b, "gt_boxes", proposals[0], "proposals");
    ops::check_same_device(op, b, "gt_boxes", proposals[0], "proposals");
    MINIDET_CHECK(l.dtype() == kInt64, op, ": expected int64 gt_labels[", n, "], got ", l.dtype());
    MINIDET_CHECK(l.dim() == 1 && l.size(0) == b.size(0), op, ": expected gt_labels[", n, "] of shape (", b.size(0),
                  ") (one label per box), got ", l.sizes());
    ops::check_same_device(op, l, "gt_labels", proposals[0], "proposals");
  }
}

void check_features(const char* op, const Tensor& features, int64_t in_channels, const std::vector<Tensor>& proposals) {
  ops::check_defined(op, features, "features");
  ops::check_floating(op, features, "features");
  const int64_t images = static_cast<int64_t>(proposals.size());
  MINIDET_CHECK(features.dim() == 4 && features.size(0) == images && features.size(1) == in_channels, op,
                ": expected features of shape (", images, ", ", in_channels, ", h, w) (one map per image), got ",
                features.sizes());
  ops::check_same_dtype(op, features, "features", proposals[0], "proposals");
  ops::check_same_device(op, features, "features", proposals[0], "proposals");
}

void check_options(const char* op, const RoIHeadsOptions& o) {
  MINIDET_CHECK(o.in_channels > 0 && o.num_classes > 0 && o.representation_size > 0, op,
                ": in_channels, num_classes and representation_size must be positive, got ", o.in_channels, ", ",
                o.num_classes, " and ", o.representation_size);
  MINIDET_CHECK(o.feature_stride > 0 && o.pooled_size > 0, op,
                ": feature_stride and pooled_size must be positive, got ", o.feature_stride, " and ", o.pooled_size);
  MINIDET_CHECK(o.batch_size_per_image > 0 && o.positive_fraction >= 0.0 && o.positive_fraction <= 1.0, op,
                ": expected batch_size_per_image > 0 and positive_fraction in [0, 1], got ", o.batch_size_per_image,
                " and ", o.positive_fraction);
  MINIDET_CHECK(std::isfinite(o.fg_iou_threshold) && std::isfinite(o.bg_iou_threshold) &&
                    o.bg_iou_threshold <= o.fg_iou_threshold,
                op, ": expected bg_iou_threshold <= fg_iou_threshold, both finite, got ", o.bg_iou_threshold, " and ",
                o.fg_iou_threshold);
  MINIDET_CHECK(std::isfinite(o.smooth_l1_beta) && o.smooth_l1_beta > 0.0, op,
                ": smooth_l1_beta must be positive, got ", o.smooth_l1_beta);
  MINIDET_CHECK(std::isfinite(o.score_threshold) && std::isfinite(o.min_size) && o.min_size >= 0.0, op,
                ": expected a finite score_threshold and min_size >= 0, got ", o.score_threshold, " and ", o.min_size);
  MINIDET_CHECK(o.nms_threshold >= 0.0 && o.detections_per_image >= 0, op,
                ": expected nms_threshold >= 0 and detections_per_image >= 0, got ", o.nms_threshold, " and ",
                o.detections_per_image);
}

}  // namespace minidet::models::detail
