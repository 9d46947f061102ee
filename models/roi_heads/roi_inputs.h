// Input checks shared by the RoI heads' entry points (internal). Each message names the calling function,
// the argument and its image, what was expected and what was given.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "models/roi_heads/roi_heads.h"

namespace minidet::models::detail {

// One gt_boxes and one gt_labels tensor per image: gt_boxes[n] (M_n, D) with the proposals' D, dtype and device,
// gt_labels[n] (M_n) int64 on that device. Shapes only: values are check_roi_targets' job.
void check_targets_shapes(const char* op, const std::vector<Tensor>& proposals, const std::vector<Tensor>& gt_boxes,
                          const std::vector<Tensor>& gt_labels);

// features (N, in_channels, h, w), floating, with the proposals' dtype and device and N = proposals.size().
void check_features(const char* op, const Tensor& features, int64_t in_channels, const std::vector<Tensor>& proposals);

// Every number of RoIHeadsOptions in its range (sizes positive, fraction in [0, 1], thresholds finite, ...).
void check_options(const char* op, const RoIHeadsOptions& options);

}  // namespace minidet::models::detail
