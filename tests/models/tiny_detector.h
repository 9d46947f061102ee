// A FasterRCNN config small enough for finite differences and for building in milliseconds: 2 classes,
// 32 x 32 images, stride 8 (4 x 4 features), 2 anchors per position, a 3 x 3 RoIAlign and an 8-wide box
// head. Shared by the detector's tests, the engine's and the error tables; tiny_batch is a batch for it, and
// tiny_rotated_detector_config / tiny_rotated_batch are the same with rotated boxes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "core/generator.h"
#include "models/faster_rcnn/detector_config.h"
#include "models/roi_heads/roi_heads.h"

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

// Two 32 x 32 images in float64 on the CPU, for the tiny detector: the first with two objects, the second
// with none (and a smaller real size).
struct TinyBatch {
  Tensor images;
  std::vector<Tensor> boxes, labels;
  models::ImageSizes sizes{{32, 32}, {32, 28}};
};

inline TinyBatch tiny_batch(uint64_t seed) {
  Generator gen(seed);
  TinyBatch b;
  b.images = rand({2, 3, 32, 32}, kFloat64, &gen);
  b.boxes = {from_vector<double>({3.3, 4.1, 17.6, 15.2, 14.7, 12.2, 29.4, 30.1}, {2, 4}), zeros({0, 4}, kFloat64)};
  b.labels = {from_vector<int64_t>({1, 2}, {2}), zeros({0}, kInt64)};
  return b;
}

// The tiny detector with rotated boxes: anchors at three angles, 6 per position.
inline models::DetectorConfig tiny_rotated_detector_config() {
  models::DetectorConfig c = tiny_detector_config();
  c.box_type = models::BoxType::kRotated;
  c.rpn.anchor_angles_degrees = {-45, 0, 45};
  return c;
}

// tiny_batch's images with rotated objects (cx, cy, w, h, angle): a turned box and a thin bar in the first
// image, none in the second.
inline TinyBatch tiny_rotated_batch(uint64_t seed) {
  TinyBatch r = tiny_batch(seed);
  r.boxes = {from_vector<double>({10.5, 9.6, 14.2, 9.1, 0.41, 21.9, 20.3, 18.7, 4.2, -1.1}, {2, 5}),
             zeros({0, 5}, kFloat64)};
  return r;
}

}  // namespace minidet::test
