// A FasterRCNN config small enough for finite differences and for building in milliseconds: 2 classes,
// 32 x 32 images, stride 8 (4 x 4 features), 2 anchors per position, a 3 x 3 RoIAlign and an 8-wide box
// head. Shared by the detector's tests and the error tables.
#pragma once

#include "models/faster_rcnn/detector_config.h"

namespace minidet::test {

inline models::DetectorConfig tiny_detector_config() {
  models::DetectorConfig c;
  c.num_classes = 2;
  c.backbone.stem_channels = 3;
  c.backbone.widths = {3, 4, 4};
  c.backbone.blocks = {1, 1, 1};
  c.backbone.strides = {2, 2, 1};
  c.rpn.anchor_sizes = {8, 16};
  c.rpn.aspect_ratios = {1.0};
  c.rpn.loss.batch_size_per_image = 16;
  c.rpn.train_proposals = {20, 8, 0.7, 1e-3, 0.0};
  c.rpn.test_proposals = {20, 8, 0.7, 1e-3, 0.0};
  c.roi_heads.pooled_size = 3;
  c.roi_heads.representation_size = 8;
  c.roi_heads.batch_size_per_image = 12;
  return c;
}

}  // namespace minidet::test
