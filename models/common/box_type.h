// BoxType: what the detector's boxes are, and the few steps whose formula depends on it.
//
//   kAxisAligned   (x1, y1, x2, y2)          Faster R-CNN (Ren et al. 2015)
//   kRotated       (cx, cy, w, h, angle)     RRPN (Ma et al. 2018, arXiv:1703.01086): the angle in radians,
//                                            counter-clockwise on screen, in [-pi/2, pi/2) (docs/rotated.md)
//
// A detector of either type runs the same stages in the same order (anchors, RPN head, RPN losses, proposals,
// RoI sampling, box head, losses, postprocessing). Only the operations below differ, so each stage calls
// them with its box type instead of naming an op, and there is one path through the model:
//
//   step                   axis-aligned                        rotated
//   box_dim                4                                   5
//   pairwise_iou(a, b)     box_iou                             box_iou_rotated (exact polygon clipping)
//   BoxTypeCoder           BoxCoder (dx, dy, dw, dh)           RotatedBoxCoder (dx, dy, dw, dh, da)
//   box_sides(b)           (x2 - x1, y2 - y1)                  (w, h)
//   clip_to_image(b)       clamp to the image                  unchanged (below)
//   nms                    segmented_nms_mask / batched_nms    segmented_nms_rotated_mask / batched_nms_rotated
//   RoI pooling            roi_align, rois (K, 5)              roi_align_rotated, rois (K, 6)
//
// Why rotated boxes are not clipped: clamping the corners of a turned box to the image does not give a
// rotated box back. detectron2's RotatedBoxes.clip clips only boxes within a degree of horizontal, through
// their axis-aligned form, and RRPN does not clip at all; minidet leaves rotated proposals and detections as
// they are (a box may reach past the border, as an object cut by the border does) and RoIAlign samples 0
// outside the map.
//
// The padding box: stages that pad per-image tables use the all-zero row of either type, whose IoU with any
// box is 0 (an empty axis-aligned box; a rotated box of zero area), so padding never matches anything.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/box_coder/box_coder.h"
#include "models/box_coder/rotated_box_coder.h"
#include "ops/nms/nms_mask.h"

namespace minidet::models {

enum class BoxType { kAxisAligned, kRotated };

// 4 or 5: the columns of one box, and of one box's deltas.
int64_t box_dim(BoxType type);
// "(x1, y1, x2, y2)" or "(cx, cy, w, h, angle)", for messages.
const char* box_layout(BoxType type);
// The type whose boxes have boxes.size(-1) columns; throws naming `op` and `what` for any other width.
BoxType box_type_of(const char* op, const Tensor& boxes, const char* what = "boxes");

// (N, M) IoU of boxes a (N, D) and b (M, D). Not differentiable (the detector matches detached boxes).
Tensor pairwise_iou(BoxType type, const Tensor& a, const Tensor& b);
// (..., 2): every box's width and height, from (..., D) boxes.
Tensor box_sides(BoxType type, const Tensor& boxes);
// (..., 4): every box's axis-aligned bounding box (x1, y1, x2, y2), from (..., D) boxes: the boxes themselves
// when axis-aligned; for a rotated box, cx -+ (|w cos a| + |h sin a|) / 2 and cy -+ (|w sin a| + |h cos a|) / 2.
// The all-zero padding row gives the empty box (0, 0, 0, 0).
Tensor bounding_boxes(BoxType type, const Tensor& boxes);
// Axis-aligned boxes clamped to [0, width] x [0, height]; rotated boxes returned as they are (see above).
Tensor clip_to_image(BoxType type, const Tensor& boxes, double height, double width);
// Several images' boxes (R, ..., D), image 0's rows_per_image[0] rows first, then image 1's, and so on: each
// row clipped to its own image, with one clip_to_image per run of consecutive images of equal size (a batch
// of one size, the usual case, is one clip whatever its number of images).
Tensor clip_to_images(BoxType type, const Tensor& boxes, const std::vector<std::array<int64_t, 2>>& image_sizes,
                      const std::vector<int64_t>& rows_per_image);
// NMS within each of `segments` equal runs of rows, as a device mask (ops/nms/nms_mask.h), no host sync.
NmsMask segmented_nms_mask(BoxType type, const Tensor& boxes, const Tensor& scores, int64_t segments,
                           double iou_threshold);
// NMS within each class: the kept rows' indices in decreasing score order (ops/nms, ops/nms_rotated).
Tensor batched_nms(BoxType type, const Tensor& boxes, const Tensor& scores, const Tensor& class_ids,
                   double iou_threshold);

// The box coder of a box type: BoxCoder with `weights`, or RotatedBoxCoder with (weights, angle_weight) and
// its centre offsets measured in `frame` and its edge swap (models/box_coder/rotated_box_coder.h).
// encode (..., D) x (..., D) -> (..., D); decode (N, D K) deltas x (N, D) references -> (N, D K).
class BoxTypeCoder {
 public:
  BoxTypeCoder(BoxType type, const std::array<double, 4>& weights, double angle_weight = 1.0,
               OffsetFrame frame = OffsetFrame::kImage, bool edge_swap = false);

  Tensor encode(const Tensor& target_boxes, const Tensor& reference_boxes) const;
  Tensor decode(const Tensor& deltas, const Tensor& reference_boxes) const;
  BoxType type() const { return type_; }

 private:
  BoxType type_;
  BoxCoder axis_aligned_;
  RotatedBoxCoder rotated_;
};

}  // namespace minidet::models
