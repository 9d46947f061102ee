// Allocators hand out raw device or host memory to Storage.
//
// CPU: 64-byte aligned blocks (one cache line, and the widest SIMD load), from the system heap.
// CUDA: a caching allocator (core/cuda/caching_allocator.h). cudaMalloc and cudaFree synchronise the device
// and cost tens of microseconds, so freed blocks are kept in size-rounded bins and handed out again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/device.h"

namespace minidet {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns nullptr for nbytes == 0. Throws minidet::Error when memory cannot be had.
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr) = 0;
};

// The allocator that serves `device`. Throws for CUDA devices when minidet was built without CUDA.
Allocator* allocator_for(const Device& device);

constexpr size_t kCpuAlignment = 64;

// Keeps the host memory that tensors free inside the process, for programs that allocate and free the same
// large buffers every step (a training loop). By default glibc's malloc serves blocks above a threshold
// with mmap and returns free memory at the top of the heap to the system, so the next step touches fresh
// pages again, each a page fault the kernel zero-fills. This sets the mmap threshold to its largest,
// 32 MiB, and turns trimming off (mallopt; glibc only, elsewhere nothing): the process keeps its peak
// memory and stops paying those faults every step (docs/detector.md has the measurement). Process-wide,
// so programs opt in (the minidet program and bench_detector do); a library should not change its host's
// malloc.
void retain_freed_host_memory();

// Bytes for people, in powers of 1024 with two decimals: "512 B", "1.50 KiB", "4.00 TiB". Out-of-memory
// messages print this next to the exact count.
std::string format_bytes(uint64_t bytes);

}  // namespace minidet
