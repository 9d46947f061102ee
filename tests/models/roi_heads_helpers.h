// What the RoI-heads test files use: a small RoIHeads configuration, a hand-made batch and tensor readers.
#pragma once

#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "models/roi_heads/roi_heads.h"

namespace minidet::test {

// 2 input channels, 2 classes, stride 4, a 6-wide representation.
inline models::RoIHeadsOptions tiny_roi_heads_options() {
  models::RoIHeadsOptions o;
  o.in_channels = 2;
  o.num_classes = 2;
  o.feature_stride = 4;
  o.representation_size = 6;
  return o;
}

// Image 0: objects A = (0, 0, 10, 10) of class 2 and B = (20, 20, 30, 30) of class 1, and four proposals:
//   p0 = (0, 0, 10, 5)    IoU with A 50/100 = 0.5 (foreground: the threshold counts)   class 2
//   p1 = (20, 20, 30, 28) IoU with B 80/100 = 0.8                                        class 1
//   p2 = (0, 0, 10, 4)    IoU with A 0.4: background
//   p3 = (40, 40, 50, 50) no overlap: background
// Image 1: no objects, two proposals.
struct HandCase {
  std::vector<Tensor> proposals, gt_boxes, gt_labels;
};

inline HandCase hand_case(DType dtype = kFloat64, Device device = Device::cpu()) {
  const TensorOptions o(dtype, device);
  HandCase c;
  c.proposals = {from_vector<double>({0, 0, 10, 5, 20, 20, 30, 28, 0, 0, 10, 4, 40, 40, 50, 50}, {4, 4}).to(o),
                 from_vector<double>({1, 1, 5, 5, 2, 2, 9, 9}, {2, 4}).to(o)};
  c.gt_boxes = {from_vector<double>({0, 0, 10, 10, 20, 20, 30, 30}, {2, 4}).to(o), zeros({0, 4}, o)};
  c.gt_labels = {from_vector<int64_t>({2, 1}).to(device), zeros({0}, TensorOptions(kInt64, device))};
  return c;
}

inline std::vector<bool> bools(const Tensor& t) { return t.to_vector<bool>(); }

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
inline std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

}  // namespace minidet::test
