// rpn_proposals: from the RPN's per-anchor outputs to each image's proposals (Ren et al. 2015; torchvision's
// RegionProposalNetwork.filter_proposals), for one feature level.
//
// Per image n, with o (K) its objectness logits, d (K, D) its deltas and the anchors (K, D), D = 4 for
// axis-aligned anchors and 5 for rotated ones (the box type, models/common/box_type.h):
//   top       = topk(o, min(pre_nms_top_n, K))                      the best-scoring anchors first
//   boxes     = clip(decode(d[top], anchors[top]), image n's (height, width))   BoxCoder(1,1,1,1) or
//               RotatedBoxCoder(1,1,1,1,1); rotated boxes are not clipped (box_type.h says why)
//   scores    = sigmoid(o[top])
//   keep      = boxes with both sides >= min_size and score >= score_threshold
//   nms       = NMS(boxes[keep], scores[keep], nms_threshold)   (per image: images never suppress each other;
//               rotated NMS for rotated boxes)
//   proposals = the first post_nms_top_n of nms, in decreasing score order   (P_n <= post_nms_top_n, D)
// Everything is detached: proposals are constants for the second stage, as in torchvision (the RPN learns
// from its own losses only).
//
// Ties keep input order everywhere (topk and NMS sort stably). A box with a NaN coordinate or score fails
// both tests above and is dropped, as remove_small_boxes drops it. In anomaly mode (autograd/anomaly.h, minidet
// train --detect-anomaly) such rows are an error that says how many scores and boxes are NaN, at the cost of
// one more device-to-host copy per call; outside anomaly mode nothing is counted.
//
// Device work: every step runs for the whole batch at once on fixed-size (N, T) tables, T = min(pre_nms_top_n,
// K), with masks instead of data-dependent shapes, and one segmented NMS call, a segment per image (how:
// rpn_proposals.cpp). Gathers use the raw take kernel, not gather/index_select, whose host-side index check
// would cost a sync each: the indices come from topk and argsort, in range by construction.
// Host synchronisations on CUDA per call, whatever the batch size: 1 device-to-host copy, of the N per-image
// proposal counts, from which the host cuts each image's slice of a (N, P, 4) table (the output is a
// std::vector of per-image tensors, so their sizes must reach the host). NMS returns its kept rows as a
// device mask (ops/nms/nms_mask.h), and its status rides on the same copy.
// No host-to-device copy (image sizes enter as kernel scalars). N = 0, K = 0: no device work at all.
#pragma once

#include <array>
#include <vector>

#include "core/tensor.h"
#include "models/box_coder/rotated_box_coder.h"
#include "models/common/padded_proposals.h"

namespace minidet::models {

struct ProposalOptions {
  int64_t pre_nms_top_n = 1000;   // per image, before NMS
  int64_t post_nms_top_n = 300;   // per image, after NMS
  double nms_threshold = 0.7;
  double min_size = 1e-3;         // both sides, in pixels
  double score_threshold = 0.0;   // on the sigmoid score
  // Rotated anchors only: the frame of the decoded centre offsets, the RPN loss's (set from
  // DetectorConfig::rotated_offsets; not a key of the train / test JSON objects).
  OffsetFrame rotated_offsets = OffsetFrame::kImage;
};

// Throws, naming `op`, when an option is out of range (top-n < 1, threshold outside [0, 1], min_size < 0 or
// non-finite).
void check_proposal_options(const char* op, const ProposalOptions& options);

// objectness (N, K), deltas (N, K, D) in anchor order (flatten_objectness / flatten_deltas); anchors (K, D)
// of the same dtype and device; image_sizes[n] = (height, width) of image n before padding (positive).
// Returns one (P_n, D) tensor per image, detached, on the inputs' device, in decreasing score order.
std::vector<Tensor> rpn_proposals(const Tensor& objectness, const Tensor& deltas, const Tensor& anchors,
                                  const std::vector<std::array<int64_t, 2>>& image_sizes,
                                  const ProposalOptions& options = {});

// The same proposals as one (N, P, D) table and device-side counts (models/common/padded_proposals.h),
// P = min(post_nms_top_n, pre_nms_top_n, K): no host synchronisation at all. NMS's status is not read (it
// cannot fire here: NMS sees finite rows only, see rpn_proposals.cpp). N = 0 or K = 0: P = 0, empty tables.
PaddedProposals rpn_proposals_padded(const Tensor& objectness, const Tensor& deltas, const Tensor& anchors,
                                     const std::vector<std::array<int64_t, 2>>& image_sizes,
                                     const ProposalOptions& options = {});

}  // namespace minidet::models
