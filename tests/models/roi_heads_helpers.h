// What both RoI-heads test files use: a small RoIHeads configuration and tensor readers.
#pragma once

#include <cstdint>
#include <vector>

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

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
inline std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

}  // namespace minidet::test
