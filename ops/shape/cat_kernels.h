// The launchers behind cat (cat.cpp checks the operands and calls one). Both copy every piece into its slice
// of `out` along `dim`: `out` is contiguous; every piece is non-empty, of out's dtype and device, and starts
// at `offsets[i]` along dim.
//
// On the CPU each piece is one Tensor::copy_. On a GPU that would be a launch per piece, each a host call of
// several microseconds; a detector's training step joins dozens of tiny per-image pieces (proposals,
// objects, padding), so the host, not the GPU, set the pace there. So the CUDA launcher copies the contiguous
// pieces in one launch per kCatPiecesPerLaunch of them, and only the others one by one.
#pragma once

#include <vector>

#include "core/macros.h"
#include "core/tensor.h"

namespace minidet::ops::detail {

void cat_cpu(const Tensor& out, const std::vector<Tensor>& pieces, const std::vector<int64_t>& offsets, int64_t dim);
#if MINIDET_WITH_CUDA
inline constexpr int kCatPiecesPerLaunch = 64;
void cat_cuda(const Tensor& out, const std::vector<Tensor>& pieces, const std::vector<int64_t>& offsets, int64_t dim);
#endif

}  // namespace minidet::ops::detail
