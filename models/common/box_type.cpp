#include "models/common/box_type.h"

#include <cmath>

#include "core/error.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"
#include "ops/boxes/box_geometry.h"
#include "ops/boxes/box_iou.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/nms/nms.h"
#include "ops/nms_rotated/nms_rotated.h"
#include "ops/nms_rotated/nms_rotated_mask.h"
#include "ops/shape/cat.h"
#include "ops/shape/shape.h"

namespace minidet::models {

int64_t box_dim(BoxType type) { return type == BoxType::kRotated ? 5 : 4; }

const char* box_layout(BoxType type) {
  return type == BoxType::kRotated ? "(cx, cy, w, h, angle)" : "(x1, y1, x2, y2)";
}

BoxType box_type_of(const char* op, const Tensor& boxes, const char* what) {
  MINIDET_CHECK(boxes.defined() && boxes.dim() >= 1 && (boxes.size(-1) == 4 || boxes.size(-1) == 5), op,
                ": expected ", what, " with 4 columns (x1, y1, x2, y2) or 5 (cx, cy, w, h, angle), got ",
                boxes.defined() ? boxes.sizes() : Shape{});
  return boxes.size(-1) == 5 ? BoxType::kRotated : BoxType::kAxisAligned;
}

Tensor pairwise_iou(BoxType type, const Tensor& a, const Tensor& b) {
  return type == BoxType::kRotated ? box_iou_rotated(a, b) : box_iou(a, b);
}

Tensor box_sides(BoxType type, const Tensor& boxes) {
  const int64_t last = boxes.dim() - 1;
  if (type == BoxType::kRotated) return narrow(boxes, last, 2, 2);
  return sub(narrow(boxes, last, 2, 2), narrow(boxes, last, 0, 2));
}

Tensor bounding_boxes(BoxType type, const Tensor& boxes) {
  if (type == BoxType::kAxisAligned) return boxes;
  const int64_t last = boxes.dim() - 1;
  const Tensor cx = select(boxes, last, 0), cy = select(boxes, last, 1), w = select(boxes, last, 2),
               h = select(boxes, last, 3), a = select(boxes, last, 4);
  const Tensor c = abs(cos(a)), s = abs(sin(a));
  const Tensor half_x = mul(add(mul(w, c), mul(h, s)), 0.5), half_y = mul(add(mul(w, s), mul(h, c)), 0.5);
  return stack({sub(cx, half_x), sub(cy, half_y), add(cx, half_x), add(cy, half_y)}, -1);
}

Tensor clip_to_image(BoxType type, const Tensor& boxes, double height, double width) {
  return type == BoxType::kRotated ? boxes : clip_boxes_to_image(boxes, height, width);
}

Tensor clip_to_images(BoxType type, const Tensor& boxes, const std::vector<std::array<int64_t, 2>>& image_sizes,
                      const std::vector<int64_t>& rows_per_image) {
  const size_t images = rows_per_image.size();
  MINIDET_CHECK(image_sizes.size() == images, "clip_to_images: expected one image size per image (", images, "), got ",
                image_sizes.size());
  int64_t total = 0;
  for (int64_t rows : rows_per_image) total += rows;
  MINIDET_CHECK(boxes.dim() >= 1 && boxes.size(0) == total, "clip_to_images: expected ", total,
                " rows (the images' rows summed), got boxes of shape ", boxes.sizes());
  if (type == BoxType::kRotated) return boxes;
  std::vector<Tensor> clipped;
  int64_t start = 0;
  for (size_t first = 0, last = 0; first < images; first = last) {
    int64_t rows = 0;
    while (last < images && image_sizes[last] == image_sizes[first]) rows += rows_per_image[last++];
    const double height = static_cast<double>(image_sizes[first][0]),
                 width = static_cast<double>(image_sizes[first][1]);
    clipped.push_back(clip_to_image(type, narrow(boxes, 0, start, rows), height, width));
    start += rows;
  }
  if (clipped.size() == 1) return clipped[0];
  return clipped.empty() ? boxes : cat(clipped, 0);
}

NmsMask segmented_nms_mask(BoxType type, const Tensor& boxes, const Tensor& scores, int64_t segments,
                           double iou_threshold) {
  return type == BoxType::kRotated ? segmented_nms_rotated_mask(boxes, scores, segments, iou_threshold)
                                   : minidet::segmented_nms_mask(boxes, scores, segments, iou_threshold);
}

Tensor batched_nms(BoxType type, const Tensor& boxes, const Tensor& scores, const Tensor& class_ids,
                   double iou_threshold) {
  return type == BoxType::kRotated ? batched_nms_rotated(boxes, scores, class_ids, iou_threshold)
                                   : minidet::batched_nms(boxes, scores, class_ids, iou_threshold);
}

BoxTypeCoder::BoxTypeCoder(BoxType type, const std::array<double, 4>& weights, double angle_weight, OffsetFrame frame,
                           bool edge_swap)
    : type_(type),
      axis_aligned_(weights),
      rotated_({weights[0], weights[1], weights[2], weights[3], angle_weight}, std::log(1000.0 / 16.0), frame,
               edge_swap) {}

Tensor BoxTypeCoder::encode(const Tensor& target_boxes, const Tensor& reference_boxes) const {
  return type_ == BoxType::kRotated ? rotated_.encode(target_boxes, reference_boxes)
                                    : axis_aligned_.encode(target_boxes, reference_boxes);
}

Tensor BoxTypeCoder::decode(const Tensor& deltas, const Tensor& reference_boxes) const {
  return type_ == BoxType::kRotated ? rotated_.decode(deltas, reference_boxes)
                                    : axis_aligned_.decode(deltas, reference_boxes);
}

}  // namespace minidet::models
