// One warp per row: the CUDA layout for row-wise ops whose rows are short to medium (softmax over classes,
// cross_entropy). A block of 256 threads holds 8 warps, so 8 rows; lane l of a warp handles elements
// l, l + 32, ... of its row, and the 32 partial results meet in a butterfly of shuffles.
//
// The butterfly (xor 16, 8, 4, 2, 1) leaves every lane holding the same, bitwise-identical total: at each
// step lanes i and i^offset add the same two numbers (a + b == b + a exactly in IEEE arithmetic). The order
// of additions is fixed, so results are deterministic from run to run.
#pragma once

#include <cmath>

namespace minidet::ops::detail {

constexpr int kWarpSize = 32;
constexpr int kRowsPerBlock = 8;  // warps per block of 256 threads

template <typename T>
__device__ inline T warp_sum(T v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// fmax ignores NaN; a row holding NaN still turns NaN through its sum of exponentials.
template <typename T>
__device__ inline T warp_max(T v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Loops `row` over [0, rows) with one warp per row. `row` is the same for all 32 lanes of a warp, so whole
// warps enter and leave the loop together, as the full-mask shuffles require.
#define MINIDET_WARP_ROW_LOOP(row, lane, rows)                                                       \
  const int lane = threadIdx.x % ::minidet::ops::detail::kWarpSize;                                  \
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * ::minidet::ops::detail::kRowsPerBlock +     \
                     threadIdx.x / ::minidet::ops::detail::kWarpSize;                                \
       row < (rows); row += static_cast<int64_t>(gridDim.x) * ::minidet::ops::detail::kRowsPerBlock)

inline unsigned warp_row_blocks(int64_t rows) {
  int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535) blocks = 65535;
  return static_cast<unsigned>(blocks);
}

}  // namespace minidet::ops::detail
