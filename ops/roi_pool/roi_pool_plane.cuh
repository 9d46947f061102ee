// What RoIPool's plane kernels share: a block that owns one (H, W) plane of image n lists that image's RoIs
// in shared memory, a piece of kPiece rows at a time, and works through the listed RoIs' bins. The fast
// forward and backward (roi_pool_cuda.cu) keep the plane itself in shared memory; the deterministic backward
// on small planes (roi_pool_deterministic_cuda.cu) keeps the plane's sums and its bins' counts per pixel there.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/context.h"
#include "ops/roi_pool/roi_pool_kernels.h"

namespace minidet::ops::detail::roi_plane {

constexpr int kPiece = 1024;  // RoI rows listed at a time
constexpr int kWarps = 32;    // the most warps a block has (1,024 threads)

// The dynamic shared memory a plane kernel may have: one block's cap less room for its static shared memory
// (list_rois's warp counts; static and dynamic shared memory count against one cap).
inline size_t dynamic_bytes_cap() { return size_t(cuda::max_shared_memory_per_block()) - 512; }

// Whether a row's batch index names one of the images (false for NaN); it is then truncated, as on the CPU.
template <typename T>
__device__ inline bool names_an_image(T batch, int64_t images) {
  return batch > T(-1) && batch < T(images);
}

// Lists, in shared memory, the rows [first, first + kPiece) whose batch index is image blockIdx.y, in k order,
// and returns their number. A row whose batch index names no image (possible only with the value check off)
// is listed by image 0's blocks as ~k, so that the forward writes its bins as empty rather than leaving them
// unset. The deterministic backward adds each pixel's bins in k order, so the list keeps it: a block's threads
// (a multiple of 32) take the rows in turn, a ballot ranks each warp's hits, and the warps' counts before it
// give each warp its place.
template <typename T>
__device__ int list_rois(const T* rois, int64_t num_rois, int64_t images, int64_t first, int* list) {
  __shared__ int warp_hits[kWarps];
  const int64_t image = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int64_t last = first + kPiece < num_rois ? first + kPiece : num_rois;
  int listed = 0;
  __syncthreads();  // every thread is done with the previous piece's list
  for (int64_t k0 = first; k0 < last; k0 += blockDim.x) {
    const int64_t k = k0 + threadIdx.x;
    bool take = false, valid = false;
    if (k < last) {
      valid = names_an_image(rois[k * 5], images);
      take = valid ? static_cast<int64_t>(rois[k * 5]) == image : image == 0;
    }
    const unsigned hits = __ballot_sync(0xffffffffu, take);
    if (lane == 0) warp_hits[warp] = __popc(hits);
    __syncthreads();
    int before = listed, total = listed;
    for (int w = 0; w < warps; ++w) {
      before += w < warp ? warp_hits[w] : 0;
      total += warp_hits[w];
    }
    if (take) list[before + __popc(hits & ((1u << lane) - 1))] = valid ? int(k) : ~int(k);
    listed = total;
    __syncthreads();  // warp_hits is rewritten by the next round
  }
  return listed;
}

}  // namespace minidet::ops::detail::roi_plane
