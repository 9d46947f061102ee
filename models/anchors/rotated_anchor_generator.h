// RotatedAnchorGenerator: the reference boxes of a rotated detector, AnchorGenerator's anchors turned to a
// fixed set of angles: A = ratios x sizes x angles rotated boxes (cx, cy, w, h, a) at every position of each
// feature map. The rotation proposals of RRPN (Ma et al. 2018, "Arbitrary-Oriented Scene Text Detection via
// Rotation Proposals", arXiv:1703.01086, section 3.3: scales x ratios x orientations) and detectron2's
// RotatedAnchorGenerator (detectron2/modeling/anchor_generator.py).
//
// Boxes are minidet's rotated boxes (models/box_coder/rotated_box_coder.h): a in radians, counter-clockwise
// on screen, in [-pi/2, pi/2). The angles given to the constructor are mapped with normalize_angle, THE
// normalisation, so pi/2 becomes -pi/2 and 3pi/4 becomes -pi/4; two angles naming the same box (a and
// a + k pi) are refused, since they would give two identical anchors at every position.
//
// Cell anchors, per level, centred on (0, 0), for every ratio r (outer loop), size s, angle a (inner):
//   (0, 0, w, h, a)   with w, h exactly those of AnchorGenerator: h / w = r, w h = s^2, each half-side
//                     rounded half to even in float32 as torchvision does (w = x2 - x1 of its anchor).
// Rounded, not exact, so that a rotated detector with angles {0} has exactly the axis-aligned detector's
// anchors written as (cx, cy, w, h, 0): one FasterRCNN, two box types, the same reference boxes. detectron2
// keeps them exact instead (w = sqrt(s^2 / r), h = r w, no rounding); the two differ by less than one pixel
// in w and h (a half-side moves by at most 0.5). The loop order is AnchorGenerator's (ratio, size), with the
// angle innermost, so anchor index k = (ratio_index * sizes + size_index) * angles + angle_index; detectron2
// loops size-major (size, ratio, angle) and takes degrees.
//
// Grid anchors for a feature map of h x w cells with stride (stride_h, stride_w) pixels:
//   anchors[(y * w + x) * A + k] = cell_anchor[k] + (x * stride_w, y * stride_h, 0, 0, 0)
// centred on the top-left corner of their cell, like AnchorGenerator's (and detectron2's default offset
// 0.0): the angle-0 anchor's centre is the centre of the matching axis-aligned anchor. Ordered by row, then
// column, then anchor, the order of an RPN head output (N, A, h, w) permuted to (N, h, w, A).
//
// anchors() takes the image size and one feature size per level, derives the strides by integer division
// (H / h_l, W / w_l) and concatenates the levels: (sum_l h_l * w_l * A_l, 5).
//
// Like AnchorGenerator's, the grid anchors are built on the requested device and dtype (arange and broadcast
// additions, no host loop), cached per (level, feature size, stride, dtype, device) behind a mutex, and the
// cached tensor itself is returned read-only (Tensor::make_read_only). Anchors never require grad.
//
// Why a separate class rather than a mode of AnchorGenerator: the rows have another width (5, not 4), the
// constructor another argument, and the axis-aligned header reads like torchvision's without branches. It
// holds an AnchorGenerator for what the two share (validating sizes and ratios, the rounded w and h), and
// takes the level loop of anchors() and the read-only cache from models/anchors/anchor_levels.h, so only the
// small grid code of the two differs.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "models/anchors/anchor_generator.h"
#include "models/anchors/anchor_levels.h"

namespace minidet::models {

class RotatedAnchorGenerator {
 public:
  // One list of sizes, of aspect ratios (height / width) and of angles (radians, any finite value; stored
  // normalised) per feature level. Sizes and ratios positive and finite; every list non-empty; the angles of
  // a level name different boxes (no two differ by a multiple of pi).
  RotatedAnchorGenerator(std::vector<std::vector<double>> sizes, std::vector<std::vector<double>> aspect_ratios,
                         std::vector<std::vector<double>> angles);

  int64_t num_levels() const { return axis_aligned_.num_levels(); }
  // A = ratios x sizes x angles of the level: what the rotated RPN head must output per position.
  int64_t num_anchors_per_location(int64_t level) const;
  // The level's angles after normalize_angle, in the given order.
  const std::vector<double>& angles(int64_t level) const;

  // (A, 5) anchors of one level centred on (0, 0) (see the formula above).
  Tensor cell_anchors(int64_t level, const TensorOptions& options = {}) const;
  // (feature_h * feature_w * A, 5) anchors of one level over a feature map; cached and read-only.
  Tensor grid_anchors(int64_t level, int64_t feature_h, int64_t feature_w, int64_t stride_h, int64_t stride_w,
                      const TensorOptions& options = {});
  // Every level's grid anchors for an image of image_h x image_w pixels and one (h, w) feature size per
  // level, concatenated in level order.
  Tensor anchors(int64_t image_h, int64_t image_w, const std::vector<std::pair<int64_t, int64_t>>& feature_sizes,
                 const TensorOptions& options = {});

  // How many grid-anchor tensors the cache holds (for tests).
  size_t cache_size() const;

 private:
  AnchorGenerator axis_aligned_;  // validates sizes and ratios; its cell anchors give w and h
  std::vector<std::vector<double>> angles_;
  detail::GridAnchorCache cache_{"RotatedAnchorGenerator",
                                 "the RotatedAnchorGenerator's cached grid anchors, returned to every caller at "
                                 "this size (models/anchors/rotated_anchor_generator.h)"};
};

}  // namespace minidet::models
