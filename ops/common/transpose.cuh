// A batched transpose on CUDA, (B, R, S) -> (B, S, R), through shared-memory tiles: how the channel-last
// kernels (RoIAlign, RoIPool, deformable conv) turn an NCHW map into NHWC and their NHWC gradients back.
#pragma once

#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/error.h"

namespace minidet::ops::detail::tiled_transpose {

constexpr int kTile = 32;     // transpose tile: kTile x kTile values through shared memory,
constexpr int kTileRows = 8;  // by kTile x kTileRows threads, kTile / kTileRows values each
constexpr int kTransposeThreads = kTile * kTileRows;

// out[b, s, r] = in[b, r, s] for (B, R, S) -> (B, S, R), divided by divisors[b] when kDivide (RoIAlign's
// deterministic backward lays out dy / count so, roi_align_sorted.cuh). Reads and writes are both coalesced:
// a warp reads a row of the tile and writes a column of it, through shared memory (+1 column against bank
// conflicts). Each thread's kTile / kTileRows loads are unrolled, so they are all in flight before the first
// store to shared memory (a copy spends nothing but memory and instructions, and waits on its loads
// otherwise). Indices are of type I: 32-bit whenever B R S fits, which leaves the kernel fewer instructions
// per element than 64-bit products. (Tiles of 64 columns, which hold a box head's 7 x 7 bins whole, measured
// no faster.)
template <typename T, typename I, bool kDivide>
__global__ void __launch_bounds__(kTransposeThreads)
    transpose_kernel(const T* in, T* out, I batch, I rows, I cols, const T* divisors) {
  __shared__ T tile[kTile][kTile + 1];
  const I col_tiles = (cols + kTile - 1) / kTile, row_tiles = (rows + kTile - 1) / kTile;
  const I tiles = batch * row_tiles * col_tiles;
  for (I t = blockIdx.x; t < tiles; t += gridDim.x) {
    const I b = t / (row_tiles * col_tiles);
    const I r0 = (t / col_tiles) % row_tiles * kTile, c0 = t % col_tiles * kTile;
    const T* src = in + b * rows * cols;
    T* dst = out + b * rows * cols;
#pragma unroll
    for (int j = 0; j < kTile / kTileRows; ++j) {
      const int i = threadIdx.y + j * kTileRows;
      const I r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) {
        if constexpr (kDivide)
          tile[i][threadIdx.x] = src[r * cols + c] / divisors[b];
        else
          tile[i][threadIdx.x] = src[r * cols + c];
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile / kTileRows; ++j) {
      const int i = threadIdx.y + j * kTileRows;
      const I c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols) dst[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

template <typename T, bool kDivide = false>
void transpose(const T* in, T* out, int64_t batch, int64_t rows, int64_t cols, const T* divisors = nullptr) {
  MINIDET_CHECK(!kDivide || divisors != nullptr, "tiled_transpose::transpose: dividing needs the divisors");
  const int64_t tiles = batch * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  if (tiles == 0) return;
  const dim3 grid(unsigned(cuda::blocks_for(tiles, 1))), block(kTile, kTileRows);
  // 32-bit when every index fits, the padded tiles' included (and the tests have not forced 64 bits).
  const int64_t padded = batch * ((rows + kTile - 1) / kTile * kTile) * ((cols + kTile - 1) / kTile * kTile);
  if (padded < (int64_t(1) << 31) && !cuda::int64_index_forced())
    transpose_kernel<T, uint32_t, kDivide><<<grid, block, 0, cuda::current_stream()>>>(
        in, out, uint32_t(batch), uint32_t(rows), uint32_t(cols), divisors);
  else
    transpose_kernel<T, int64_t, kDivide>
        <<<grid, block, 0, cuda::current_stream()>>>(in, out, batch, rows, cols, divisors);
  MINIDET_CUDA_LAUNCH_CHECK("tiled_transpose::transpose_kernel");
}

}  // namespace minidet::ops::detail::tiled_transpose
