// PaddedProposals: every image's proposals in one fixed-size table, for a training step without a host
// synchronisation (RPN::forward_train's rpn_proposals_padded -> RoIHeads::forward_train's sample_rois_padded).
//
//   boxes   (N, P, D)  image n's proposals are rows 0..counts[n]-1 of boxes[n], in decreasing score order;
//                      the rows after them are boxes that are not proposals (never used as such)
//   counts  (N) int64  on the boxes' device: never copied to the host
// D = 4 for axis-aligned boxes (x1, y1, x2, y2), 5 for rotated ones (cx, cy, w, h, angle).
//
// P is fixed by the options (min(post_nms_top_n, pre_nms_top_n, anchors)), so every shape of the step is
// known without looking at the data; per-image std::vector<Tensor> proposals need their sizes on the host,
// one device-to-host copy per step.
//
// pad_proposals builds the table from per-image proposals (P_n, D), for tests and walkthroughs that start
// from lists: P = max_n P_n, the rows past each image's count are zeros. It knows the counts on the host, so
// it costs one host-to-device copy of them (no device-to-host copy).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace minidet::models {

struct PaddedProposals {
  Tensor boxes;   // (N, P, D), detached
  Tensor counts;  // (N) int64
};

// proposals[n] (P_n, D), all of one floating dtype and one device, at least one image (N = 0 would leave
// the dtype and device unknown). Returns boxes (N, max P_n, D), detached, and counts (N) on that device.
PaddedProposals pad_proposals(const std::vector<Tensor>& proposals);

// Throws, naming `op`, unless there is at least one image and every proposals[n] is defined, floating,
// (P_n, D), with proposals[0]'s dtype, device and D (4 or 5): the checks of every entry point that takes per-image
// proposals (pad_proposals, the RoI heads' inference and sampling).
void check_proposal_list(const char* op, const std::vector<Tensor>& proposals);

// The same for a table: boxes defined and (N, P, d) with N >= 1 (`layout` names the columns in the message),
// counts int64 (N) on the boxes' device. Returns image n's P slots, boxes[n] as detached views: the per-image list
// that the shape, dtype and device checks of the entry points taking a table (the RoI heads' sampling, training
// and inference) go on with.
std::vector<Tensor> checked_slots(const char* op, const PaddedProposals& proposals, int64_t d, const char* layout);

// (N P) with value n on image n's P slots, the table's rows flattened image by image: the image index of every
// slot, in `options`' dtype and device. Made from the process's shared arange (ops/elementwise/shared_scalar.h),
// so after the first call for a batch size it costs one small kernel and no upload.
Tensor slot_images(int64_t images, int64_t per_image, const TensorOptions& options);

}  // namespace minidet::models
