// PaddedProposals: every image's proposals in one fixed-size table, for a training step without a host
// synchronisation (rpn_proposals_padded -> sample_rois).
//
//   boxes   (N, P, 4)  image n's proposals are rows 0..counts[n]-1 of boxes[n], in decreasing score order;
//                      the rows after them are boxes that are not proposals (never used as such)
//   counts  (N) int64  on the boxes' device: never copied to the host
//
// P is fixed by the options (min(post_nms_top_n, pre_nms_top_n, anchors)), so every shape of the step is
// known without looking at the data; per-image std::vector<Tensor> proposals need their sizes on the host,
// one device-to-host copy per step.
#pragma once

#include "core/tensor.h"

namespace minidet::models {

struct PaddedProposals {
  Tensor boxes;   // (N, P, 4), detached
  Tensor counts;  // (N) int64
};

}  // namespace minidet::models
