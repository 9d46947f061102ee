// CUDA RoIPool kernels, same bins and tie rule as the CPU (roi_pool_kernels.h).
//   forward (tiles):       float32 inputs larger than the L2 cache: roi_pool_tiles_cuda.cu, a block per tile of
//                          a channel-last copy of the map, lanes over channels.
//   forward (plane):       other inputs larger than the L2 cache (float64) when one (H, W) plane fits a block's
//                          shared memory: a block per plane (image n, channel c) copies it there once, then
//                          lists its image's RoIs and scans each of their bins there, a thread per bin. A
//                          max over a bin reads every pixel of the bin, and a detector's RoIs overlap, so
//                          together the bins read each pixel many times; once the input outgrows L2, the
//                          per-bin kernel's reads come from DRAM again and again, the plane's only once.
//   forward (per bin):     otherwise one thread per bin (k, p, q) and group of channels finds the bin's
//                          extents once and scans the bin in each of its channels in global memory, in 32-bit
//                          index arithmetic when the tensors allow. Consecutive threads are neighbouring bins,
//                          and an input within L2 serves their reads.
//   backward (plane):      the plane blocks add each bin's dy at its argmax into a shared copy of dx's plane
//                          with shared-memory atomics and write the plane whole (no zero fill).
//   backward (per bin):    otherwise one thread per output element atomically adds dy at its argmax in dx
//                          (NCHW, zeroed first).
//   backward (determin.):  roi_pool_deterministic_cuda.cu.
// Measured against each other (docs/benchmarks.md): the plane kernels win on a (2, 256, 200, 272) input of
// 111 MB and lose on inputs of 1 and 2 MB; the same scheme for RoIAlign lost to its channel-last kernels,
// whose bilinear samples each serve 32 channels at one location.
#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/roi_pool/roi_pool_kernels.h"
#include "ops/roi_pool/roi_pool_plane.cuh"

namespace minidet::ops::detail {
namespace {

// ---- the per-bin kernels -----------------------------------------------------------------------------------

// A bin's extents (two divisions, four fused multiply-adds with floor or ceil, and their clipping) are the
// same in every channel, so a thread of the per-bin forward finds them once and scans that bin in
// kBinChannels neighbouring channels. The forward was issue-bound with a thread per output element; four
// channels a thread took it from 0.063 to 0.043 ms on 64 channels of 32 x 32, and eight were within a tenth
// of four either way (docs/benchmarks.md). Thread t is bin t % bins of channel group (t / bins) % groups
// of RoI t / (bins * groups): a warp's lanes are neighbouring bins, and each channel's stores are contiguous.
constexpr int kBinChannels = 4;

template <typename T, typename Index>
__global__ void forward_kernel(Index n, const T* input, const T* rois, T* output, int64_t* argmax,
                               RoIPoolGeometry g) {
  const Index pooled_w = Index(g.pooled_width), bins = Index(g.pooled_height) * pooled_w;
  const Index channels = Index(g.channels), groups = (channels + kBinChannels - 1) / kBinChannels;
  const Index plane_size = Index(g.height * g.width);
  for (Index t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += Index(blockDim.x) * gridDim.x) {
    const Index b = t % bins, roi_group = t / bins, group = roi_group % groups, k = roi_group / groups;
    const T* roi = rois + k * 5;
    const Index batch = static_cast<Index>(roi[0]);
    const RoIPoolBin bin = roi_pool_bin(roi, g, b / pooled_w, b % pooled_w);
    const Index first = group * kBinChannels, last = min(channels, first + kBinChannels);
    for (Index c = first; c < last; ++c) {
      const Index e = (k * channels + c) * bins + b;
      roi_pool_bin_max(input + (batch * channels + c) * plane_size, Index(g.width), bin, &output[e], &argmax[e]);
    }
  }
}

template <typename T, typename Index>
__global__ void backward_atomic_kernel(Index n, const T* grad_output, const T* rois, const int64_t* argmax,
                                       T* grad_input, RoIPoolGeometry g) {
  const Index bins = Index(g.pooled_height * g.pooled_width), channels = Index(g.channels);
  for (Index e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += Index(blockDim.x) * gridDim.x) {
    const int64_t source = argmax[e];
    if (source < 0) continue;  // empty bin: nothing to route
    const Index plane = e / bins, c = plane % channels, k = plane / channels;
    const int64_t batch = static_cast<int64_t>(rois[int64_t(k) * 5]);
    atomicAdd(&grad_input[(batch * g.channels + c) * g.height * g.width + source], grad_output[e]);
  }
}

// ---- the plane kernels -------------------------------------------------------------------------------------
//
// Block (c, n) of grid (C, N) owns plane (n, c). It lists its image's RoIs in pieces (roi_pool_plane.cuh),
// working through one piece's bins before it lists the next.
using roi_plane::kPiece;

// Shared memory: the plane, then one piece's list of RoIs.
template <typename T>
struct PlaneScratch {
  T* plane;
  int* list;
  __device__ PlaneScratch(unsigned char* shared, int plane_size)
      : plane(reinterpret_cast<T*>(shared)), list(reinterpret_cast<int*>(plane + plane_size)) {}
};
template <typename T>
size_t plane_bytes(const RoIPoolGeometry& g) {
  return size_t(g.height * g.width) * sizeof(T) + kPiece * sizeof(int);
}

template <typename T>
__global__ void __launch_bounds__(1024)
    forward_plane_kernel(const T* input, const T* rois, T* output, int64_t* argmax, RoIPoolGeometry g, int64_t images) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int plane_size = int(g.height * g.width), bins = int(g.pooled_height * g.pooled_width);
  const int pooled_w = int(g.pooled_width);
  const int64_t c = blockIdx.x, image = blockIdx.y;
  const PlaneScratch<T> scratch(shared, plane_size);
  const T* source = input + (image * g.channels + c) * plane_size;
  for (int i = threadIdx.x; i < plane_size; i += blockDim.x) scratch.plane[i] = source[i];
  for (int64_t first = 0; first < g.num_rois; first += kPiece) {
    const int listed = roi_plane::list_rois(rois, g.num_rois, images, first, scratch.list);
    for (int item = threadIdx.x; item < listed * bins; item += blockDim.x) {
      const int entry = scratch.list[item / bins], b = item % bins;
      const int64_t k = entry < 0 ? ~entry : entry, e = (k * g.channels + c) * bins + b;
      // A row naming no image: its bins are empty (0, argmax -1).
      const RoIPoolBin bin = entry < 0 ? RoIPoolBin() : roi_pool_bin(rois + k * 5, g, b / pooled_w, b % pooled_w);
      roi_pool_bin_max<T, int>(scratch.plane, int(g.width), bin, &output[e], &argmax[e]);
    }
  }
}

// Each bin adds its dy at its argmax into a shared copy of dx's plane (n, c), which is then written whole.
template <typename T>
__global__ void __launch_bounds__(1024)
    backward_plane_kernel(const T* grad_output, const int64_t* argmax, const T* rois, T* grad_input, RoIPoolGeometry g,
                          int64_t images) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int plane_size = int(g.height * g.width), bins = int(g.pooled_height * g.pooled_width);
  const int64_t c = blockIdx.x, image = blockIdx.y;
  const PlaneScratch<T> scratch(shared, plane_size);
  for (int i = threadIdx.x; i < plane_size; i += blockDim.x) scratch.plane[i] = T(0);
  for (int64_t first = 0; first < g.num_rois; first += kPiece) {
    const int listed = roi_plane::list_rois(rois, g.num_rois, images, first, scratch.list);
    for (int item = threadIdx.x; item < listed * bins; item += blockDim.x) {
      const int entry = scratch.list[item / bins];
      if (entry < 0) continue;  // a row naming no image: its bins are empty
      const int64_t e = (int64_t(entry) * g.channels + c) * bins + item % bins;
      const int64_t source = argmax[e];
      if (source >= 0) atomicAdd(&scratch.plane[source], grad_output[e]);
    }
  }
  __syncthreads();
  T* target = grad_input + (image * g.channels + c) * plane_size;
  for (int i = threadIdx.x; i < plane_size; i += blockDim.x) target[i] = scratch.plane[i];
}

// Whether the plane kernels take this shape: an input larger than the L2 cache (smaller ones stay in L2 for
// the per-bin kernels' repeated reads, which then cost less than a block's copy of its plane), a plane and
// one piece's list within roi_plane::dynamic_bytes_cap, and a grid and 32-bit counts that hold it.
template <typename T>
bool plane_kernels_take(const RoIPoolGeometry& g, int64_t images) {
  const int64_t input_bytes = images * g.channels * g.height * g.width * int64_t(sizeof(T));
  return input_bytes > cuda::l2_cache_bytes() && plane_bytes<T>(g) <= roi_plane::dynamic_bytes_cap() &&
         images <= 65535 && g.channels <= INT32_MAX && g.num_rois < INT32_MAX &&
         g.pooled_height * g.pooled_width * kPiece < INT32_MAX;
}

// Grid (C, N) of 1,024 threads: a block's plane leaves room for only one or two blocks per multiprocessor.
template <typename T, typename Kernel, typename... Args>
void launch_plane(Kernel* kernel, const RoIPoolGeometry& g, int64_t images, Args... args) {
  const size_t bytes = plane_bytes<T>(g);
  cuda::opt_in_to_shared_memory(kernel, bytes);
  kernel<<<dim3(unsigned(g.channels), unsigned(images)), 1024, bytes, cuda::current_stream()>>>(args..., g, images);
}

}  // namespace

void roi_pool_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                           const RoIPoolGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  const int64_t n = output.numel();
  if (n == 0) return;
  MINIDET_DISPATCH_FLOATING(input.dtype(), "roi_pool", [&] {
    const int64_t images = input.size(0);
    if (roi_pool_tiles_take(input, g)) return roi_pool_forward_tiles_cuda(input, rois, output, argmax, g);
    if (plane_kernels_take<scalar_t>(g, images)) {
      launch_plane<scalar_t>(forward_plane_kernel<scalar_t>, g, images, input.data<scalar_t>(), rois.data<scalar_t>(),
                             output.data<scalar_t>(), argmax.data<int64_t>());
      MINIDET_CUDA_LAUNCH_CHECK("roi_pool forward_plane_kernel");
      return;
    }
    const int64_t groups = (g.channels + kBinChannels - 1) / kBinChannels;
    const int64_t threads = g.num_rois * groups * g.pooled_height * g.pooled_width;
    // 32-bit index arithmetic when both the outputs and the input's offsets fit (n >= K * 5 as PH, PW, C >= 1).
    cuda::with_index(std::max(n, input.numel()), [&](auto index) {
      using Index = decltype(index);
      forward_kernel<scalar_t, Index><<<cuda::blocks_for(threads), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          Index(threads), input.data<scalar_t>(), rois.data<scalar_t>(), output.data<scalar_t>(),
          argmax.data<int64_t>(), g);
    });
    MINIDET_CUDA_LAUNCH_CHECK("roi_pool forward_kernel");
  });
}

void roi_pool_backward_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                            const Tensor& grad_input, const RoIPoolGeometry& g, bool deterministic) {
  if (deterministic) return roi_pool_backward_deterministic_cuda(grad_output, rois, argmax, grad_input, g);
  cuda::DeviceGuard guard(grad_input.device());
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "roi_pool", [&] {
    using T = scalar_t;
    const int64_t images = grad_input.size(0);
    if (plane_kernels_take<T>(g, images)) {
      launch_plane<T>(backward_plane_kernel<T>, g, images, grad_output.data<T>(), argmax.data<int64_t>(),
                      rois.data<T>(), grad_input.data<T>());
      MINIDET_CUDA_LAUNCH_CHECK("roi_pool backward_plane_kernel");
      return;
    }
    grad_input.zero_();
    const int64_t n = grad_output.numel();
    cuda::with_index(n, [&](auto index) {
      using Index = decltype(index);
      backward_atomic_kernel<T, Index><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          Index(n), grad_output.data<T>(), rois.data<T>(), argmax.data<int64_t>(), grad_input.data<T>(), g);
    });
    MINIDET_CUDA_LAUNCH_CHECK("roi_pool backward_atomic_kernel");
  });
}

}  // namespace minidet::ops::detail
