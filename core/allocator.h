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

// Bytes for people, in powers of 1024 with two decimals: "512 B", "1.50 KiB", "4.00 TiB". Out-of-memory
// messages print this next to the exact count.
std::string format_bytes(uint64_t bytes);

}  // namespace minidet
