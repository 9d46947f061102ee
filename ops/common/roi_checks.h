// Validation shared by the RoI ops (roi_align, roi_pool, roi_align_rotated). Every message starts with the
// calling op's name, says what was expected and what was given.
//
//   check_roi_input(op, input);                       // defined, floating, 4-D (N, C, H, W)
//   check_rois(op, input, rois, /*columns=*/5);       // (K, 5) rows (batch, x1, y1, x2, y2), or 6 (rotated)
//
// check_rois checks, in this order: rois defined, 2-D with `columns` columns, the same dtype and device as
// input, and then the VALUES that would make a kernel read out of bounds or produce NaN: every coordinate
// finite, every batch index an integer in [0, N). The first offending row is reported.
//
// On CUDA the value check is ONE small kernel that writes the index of the first bad row into one device
// int64, followed by ONE 8-byte copy to the host: that copy is the only host synchronisation of the RoI ops'
// forward (the result is needed before any kernel may trust the batch indices). On the CPU it is a loop.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace minidet::ops {

void check_roi_input(const char* op, const Tensor& input);
// check_values = false skips the value check (and its synchronisation): for callers that built the rows
// themselves and can vouch for them (RoIAlignOptions::check_roi_values).
void check_rois(const char* op, const Tensor& input, const Tensor& rois, int64_t columns, bool check_values = true);
// The pooling arguments every RoI op takes: output size >= 1 on both axes, spatial_scale finite and > 0.
void check_roi_pooling(const char* op, int64_t pooled_h, int64_t pooled_w, double spatial_scale);

namespace detail {
// Index of the first row of contiguous CUDA rois (K, columns) with a non-finite coordinate or a batch index
// that is not an integer in [0, batch_size); K when every row is fine. Defined in roi_checks_cuda.cu.
#if MINIDET_WITH_CUDA
int64_t first_bad_roi_cuda(const Tensor& rois, int64_t batch_size);
#endif
}  // namespace detail

}  // namespace minidet::ops
