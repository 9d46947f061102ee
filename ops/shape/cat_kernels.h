// The CUDA launcher behind cat (cat.cpp checks the operands and calls it). Joining n pieces one copy at a
// time costs n launches, each a host call of several microseconds; a detector's training step joins dozens
// of tiny per-image pieces (proposals, objects, padding), so the host, not the GPU, set the pace there.
#pragma once

#include <vector>

#include "core/macros.h"
#include "core/tensor.h"

namespace minidet::ops::detail {

#if MINIDET_WITH_CUDA
// Copies every piece into its slice of `out` along `dim` in one launch per kCatPiecesPerLaunch pieces.
// `out` is contiguous; every piece is contiguous, non-empty, of out's dtype and device, and starts at
// `offsets[i]` along dim.
inline constexpr int kCatPiecesPerLaunch = 64;
void cat_cuda(const Tensor& out, const std::vector<Tensor>& pieces, const std::vector<int64_t>& offsets, int64_t dim);
#endif

}  // namespace minidet::ops::detail
