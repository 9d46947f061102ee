// CUDA box_iou.
//
// Forward and backward share one tiling of the (N, M) matrix: tiles of kTileA boxes of a by kTileB boxes of
// b, one 32 x 8 thread block per tile. Lane x of warp y owns box b_j (j = tile_b * 32 + x) and the boxes a_i
// with i = tile_a * kTileA + y + 8r, r < kTileA / 8, so a warp reads and writes a row i of the matrix along
// 32 consecutive j: coalesced.
//
// Forward: each lane writes IoU(a_i, b_j) for its rows.
//
// Backward, without atomics (so the bits are the same every run): each tile computes every pair's
// derivative once and reduces it two ways.
//   - grad_a partials: for each i the 32 lanes' contributions are summed with a fixed xor butterfly of warp
//     shuffles; lane 0 writes partial_a[tile_b, i].
//   - grad_b partials: each thread sums its rows in order, then warp 0 adds the 8 warps' sums in order
//     from shared memory and writes partial_b[tile_a, j].
// A second kernel sums the partials over tiles in tile order. Scratch: N * ceil(M/32) + M * ceil(N/64)
// 4-vectors, about 3/16 of the gradient's size.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/boxes/box_iou_kernels.h"

namespace minidet::ops::detail {
namespace {

constexpr int kTileB = 32;  // lanes
constexpr int kWarps = 8;   // threadIdx.y
constexpr int kTileA = 64;  // rows per tile: each warp handles kTileA / kWarps of them

// A lane keeps its box b_j and b_j's area in registers while it walks the tile's rows (a_i's area is two
// subtractions and a product, cheaper to recompute than to stage), and no thread divides a 64-bit index.
template <typename T>
__global__ void box_iou_forward_kernel(const T* a, const T* b, T* iou, int64_t n, int64_t m, int64_t tiles_a,
                                       int64_t tiles_b) {
  const int lane = threadIdx.x, warp = threadIdx.y;
  for (int64_t tile = blockIdx.x; tile < tiles_a * tiles_b; tile += gridDim.x) {
    const int64_t tile_a = tile / tiles_b, tile_b = tile % tiles_b;
    const int64_t j = tile_b * kTileB + lane;
    if (j >= m) continue;  // no barrier in this kernel, so idle lanes may leave the tile
    T box_b[4];
    for (int c = 0; c < 4; ++c) box_b[c] = b[4 * j + c];
    const T area_b = box_math::box_area(box_b);
    for (int r = 0; r < kTileA / kWarps; ++r) {
      const int64_t i = tile_a * kTileA + warp + r * kWarps;
      if (i >= n) break;
      const T* box_a = a + 4 * i;
      iou[i * m + j] = box_iou_forward_pair(box_a, box_math::box_area(box_a), box_b, area_b);
    }
  }
}

template <typename T>
__global__ void box_iou_backward_tiles_kernel(const T* a, const T* b, const T* grad, int64_t n, int64_t m,
                                              int64_t tiles_a, int64_t tiles_b, T* partial_a, T* partial_b) {
  __shared__ T warp_sums[kWarps][kTileB][4];
  const int lane = threadIdx.x, warp = threadIdx.y;
  for (int64_t tile = blockIdx.x; tile < tiles_a * tiles_b; tile += gridDim.x) {
    const int64_t tile_a = tile / tiles_b, tile_b = tile % tiles_b;
    const int64_t j = tile_b * kTileB + lane;
    const bool j_valid = j < m;
    T box_b[4] = {T(0), T(0), T(0), T(0)};
    if (j_valid)
      for (int c = 0; c < 4; ++c) box_b[c] = b[4 * j + c];
    T sum_b[4] = {T(0), T(0), T(0), T(0)};
    for (int r = 0; r < kTileA / kWarps; ++r) {
      const int64_t i = tile_a * kTileA + warp + r * kWarps;
      if (i >= n) break;  // the same i for the whole warp, so the shuffles below stay converged
      T d_a[4] = {T(0), T(0), T(0), T(0)};
      if (j_valid) {
        const IouPairGrad<T> d = box_iou_backward_pair(a + 4 * i, box_b, grad[i * m + j]);
        for (int c = 0; c < 4; ++c) {
          d_a[c] = d.a[c];
          sum_b[c] += d.b[c];
        }
      }
      for (int offset = 16; offset > 0; offset /= 2)
        for (int c = 0; c < 4; ++c) d_a[c] += __shfl_xor_sync(0xffffffffu, d_a[c], offset);
      if (lane == 0)
        for (int c = 0; c < 4; ++c) partial_a[(tile_b * n + i) * 4 + c] = d_a[c];
    }
    for (int c = 0; c < 4; ++c) warp_sums[warp][lane][c] = sum_b[c];
    __syncthreads();
    if (warp == 0 && j_valid) {
      for (int c = 0; c < 4; ++c) {
        T total = T(0);
        for (int w = 0; w < kWarps; ++w) total += warp_sums[w][lane][c];
        partial_b[(tile_a * m + j) * 4 + c] = total;
      }
    }
    __syncthreads();  // warp_sums is reused by the next tile
  }
}

// out[k] = sum over t < tiles of partial[t * count * 4 + k], in t order. k runs over count * 4 values.
template <typename T>
__global__ void sum_partials_kernel(int64_t values, const T* partial, int64_t tiles, T* out) {
  MINIDET_KERNEL_LOOP(k, values) {
    T total = T(0);
    for (int64_t t = 0; t < tiles; ++t) total += partial[t * values + k];
    out[k] = total;
  }
}

// One block per tile, up to the grid cap; the kernels loop over the remaining tiles.
unsigned tile_blocks(int64_t tiles) { return static_cast<unsigned>(tiles < cuda::kMaxBlocks ? tiles : cuda::kMaxBlocks); }

}  // namespace

void box_iou_forward_cuda(const Tensor& a, const Tensor& b, const Tensor& iou) {
  cuda::DeviceGuard guard(a.device());
  const int64_t n = a.size(0), m = b.size(0);
  const int64_t tiles_a = (n + kTileA - 1) / kTileA, tiles_b = (m + kTileB - 1) / kTileB;
  MINIDET_DISPATCH_FLOATING(a.dtype(), "box_iou", [&] {
    box_iou_forward_kernel<scalar_t><<<tile_blocks(tiles_a * tiles_b), dim3(kTileB, kWarps), 0,
                                       cuda::current_stream()>>>(a.data<scalar_t>(), b.data<scalar_t>(),
                                                                 iou.data<scalar_t>(), n, m, tiles_a, tiles_b);
    MINIDET_CUDA_LAUNCH_CHECK("box_iou_forward_kernel");
  });
}

void box_iou_backward_cuda(const Tensor& a, const Tensor& b, const Tensor& grad, const Tensor& grad_a,
                           const Tensor& grad_b) {
  cuda::DeviceGuard guard(a.device());
  const int64_t n = a.size(0), m = b.size(0);
  const int64_t tiles_a = (n + kTileA - 1) / kTileA, tiles_b = (m + kTileB - 1) / kTileB;
  // The tile kernel always writes both partials (the pair derivative yields both at once).
  const Tensor partial_a = empty({tiles_b, n, 4}, a.options());
  const Tensor partial_b = empty({tiles_a, m, 4}, a.options());
  MINIDET_DISPATCH_FLOATING(a.dtype(), "box_iou", [&] {
    box_iou_backward_tiles_kernel<scalar_t><<<tile_blocks(tiles_a * tiles_b), dim3(kTileB, kWarps), 0, cuda::current_stream()>>>(
        a.data<scalar_t>(), b.data<scalar_t>(), grad.data<scalar_t>(), n, m, tiles_a, tiles_b,
        partial_a.data<scalar_t>(), partial_b.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("box_iou_backward_tiles_kernel");
    if (grad_a.defined()) {
      sum_partials_kernel<scalar_t><<<cuda::blocks_for(4 * n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          4 * n, partial_a.data<scalar_t>(), tiles_b, grad_a.data<scalar_t>());
      MINIDET_CUDA_LAUNCH_CHECK("sum_partials_kernel");
    }
    if (grad_b.defined()) {
      sum_partials_kernel<scalar_t><<<cuda::blocks_for(4 * m), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          4 * m, partial_b.data<scalar_t>(), tiles_a, grad_b.data<scalar_t>());
      MINIDET_CUDA_LAUNCH_CHECK("sum_partials_kernel");
    }
  });
}

}  // namespace minidet::ops::detail
