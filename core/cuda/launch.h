// Launch configuration for the one-thread-per-element kernels that most ops use.
//
//   const int64_t n = output.numel();
//   my_kernel<<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(n, ...);
//   MINIDET_CUDA_LAUNCH_CHECK("my_kernel");
//
//   __global__ void my_kernel(int64_t n, ...) {
//     MINIDET_KERNEL_LOOP(i, n) { ... }   // grid-stride: any n works with a capped grid
//   }
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/context.h"

namespace minidet::cuda {

constexpr int kThreadsPerBlock = 256;
// Enough blocks to fill any current GPU many times over; the grid-stride loop covers the rest.
constexpr int64_t kMaxBlocks = 65535;

inline unsigned blocks_for(int64_t n, int threads = kThreadsPerBlock) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

// A kernel may take more than the default 48 KB of dynamic shared memory only once it opts in. It opts in
// to all it can have (the device's per-block limit less its own static shared memory), never to one
// launch's size: the setting belongs to the kernel, shared by every host thread, and a smaller value set by
// one thread could undercut another thread's launch in flight. Callers check that `bytes` fits. The default
// 48 KB counts the kernel's static shared memory too, so a launch of 48 KB or a little less, with a few bytes
// of static arrays, needs the opt-in as well (it fails with "invalid argument" otherwise).
template <typename Kernel>
void opt_in_to_shared_memory(Kernel* kernel, size_t bytes) {
  constexpr size_t kDefault = size_t(48) << 10;
  if (bytes == 0) return;
  cudaFuncAttributes attributes;
  MINIDET_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  if (bytes + attributes.sharedSizeBytes <= kDefault) return;
  MINIDET_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          max_shared_memory_per_block() - int(attributes.sharedSizeBytes)));
}

// 32-bit kernel indices. A kernel templated on its index type runs with int32_t when every offset it forms
// fits, as 32-bit division and multiplication take a few instructions where 64-bit ones take dozens, and
// half the registers. A grid-stride loop steps at most one grid (kMaxBlocks * kThreadsPerBlock < 2^24) past
// its end, so n below 2^31 - 2^24 is safe.
//
// The int64_t variants would otherwise run only on tensors of 2^31 elements, more than a test can afford. So
// int64_index_forced() (core/cuda/context.h), set by MINIDET_CUDA_INDEX64=1 or an Int64IndexScope, makes
// fits_int32 answer no: the CUDA-vs-CPU tests then check the 64-bit variants on their usual small tensors.
static_assert(kMaxBlocks * kThreadsPerBlock < (int64_t(1) << 24), "fits_int32's margin must cover a grid");
inline bool fits_int32(int64_t n) { return !int64_index_forced() && n < (int64_t(1) << 31) - (int64_t(1) << 24); }

// Calls launch(Index()) with int32_t when fits_int32(n), else int64_t; n is the largest element count or
// offset the kernel forms.
template <typename Launch>
void with_index(int64_t n, Launch&& launch) {
  if (fits_int32(n))
    launch(int32_t());
  else
    launch(int64_t());
}

}  // namespace minidet::cuda

// 64-bit grid-stride loop: index arithmetic never overflows for tensors past 2^31 elements.
#define MINIDET_KERNEL_LOOP(i, n)                                                         \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// The same loop in a kernel's own index type (int32_t where cuda::with_index has checked that every offset
// fits, else int64_t): the first product is taken in Index, and fits_int32's margin covers the last step.
#define MINIDET_KERNEL_LOOP_AS(Index, i, n) \
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += Index(blockDim.x) * gridDim.x)
