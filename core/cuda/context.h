// Per-device CUDA state shared by all ops: the stream work is queued on and the cuBLAS handle.
//
// minidet queues all work on the legacy default stream of the current device. That keeps every kernel,
// cuBLAS call and host<->device copy in one order, so the caching allocator can reuse a freed block
// immediately and no op needs explicit synchronisation. (A multi-stream design would need per-stream
// block pools and events; we choose readability.) The one exception is CUDA graph capture
// (core/cuda/graph.h), which cannot record the legacy stream: for its scope a StreamOverride makes
// current_stream() the capture stream, so every op's launches are recorded instead of run.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/device.h"

namespace minidet::cuda {

cudaStream_t current_stream();
// True while a StreamOverride is open on this thread (a graph capture is recording).
bool stream_overridden();
// Makes current_stream() return `stream` on this thread for a scope (graph capture only, see above).
class StreamOverride {
 public:
  explicit StreamOverride(cudaStream_t stream);
  ~StreamOverride();
  StreamOverride(const StreamOverride&) = delete;
  StreamOverride& operator=(const StreamOverride&) = delete;

 private:
  cudaStream_t previous_ = nullptr;
};
// The cuBLAS handle of the current device, created on first use, bound to current_stream().
cublasHandle_t cublas_handle();
int current_device();
// Number of multiprocessors of the current device (cached), for sizing grids.
int multiprocessor_count();
// The most dynamic shared memory one block of the current device can opt into (cached), in bytes: 227 KB on
// Hopper. A kernel that needs more than the default 48 KB must first opt in (cuda::opt_in_to_shared_memory,
// core/cuda/launch.h).
int max_shared_memory_per_block();
// The current device's L2 cache (cached), in bytes: 50 MB on an H100 or H200.
int64_t l2_cache_bytes();

// Whether every kernel with a 32-bit index variant must run its int64_t one (cuda::fits_int32, launch.h): a
// testing switch, so that the CUDA-vs-CPU cases cover both variants. Off unless the environment sets
// MINIDET_CUDA_INDEX64=1 or an Int64IndexScope is open. Process-wide, like the environment variable.
bool int64_index_forced();
// Forces the int64_t variants for a scope, then restores the previous setting.
class Int64IndexScope {
 public:
  Int64IndexScope();
  ~Int64IndexScope();
  Int64IndexScope(const Int64IndexScope&) = delete;
  Int64IndexScope& operator=(const Int64IndexScope&) = delete;

 private:
  bool previous_;
};

// Makes `device` current for a scope and restores the previous device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(const Device& device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace minidet::cuda
