// Per-device CUDA state shared by all ops: the stream work is queued on and the cuBLAS handle.
//
// minidet queues all work on the legacy default stream of the current device. That keeps every kernel,
// cuBLAS call and host<->device copy in one order, so the caching allocator can reuse a freed block
// immediately and no op needs explicit synchronisation. (A multi-stream design would need per-stream
// block pools and events; we choose readability.)
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/device.h"

namespace minidet::cuda {

cudaStream_t current_stream();
// The cuBLAS handle of the current device, created on first use, bound to current_stream().
cublasHandle_t cublas_handle();
int current_device();
// Number of multiprocessors of the current device (cached), for sizing grids.
int multiprocessor_count();

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
