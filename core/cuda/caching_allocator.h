// The CUDA caching allocator.
//
// Requests are rounded up to a bin size: multiples of 512 bytes below 1 MiB, and above that one of four
// sizes per power of two (2^k, 1.25*2^k, 1.5*2^k, 1.75*2^k), so at most 25% is wasted. A freed block goes
// back to the free list of its bin (no cudaFree) and the next request of that bin takes it; a request of at
// most 1 MiB whose bin is empty takes the smallest free block of up to twice its size instead. cudaMalloc is
// called only on a miss. When cudaMalloc runs out of memory, the cache is emptied and the call retried once.
//
// MINIDET_CUDA_ALLOC_LOG=1 in the environment prints every cudaMalloc (bin size, requested bytes, the pool,
// the total reserved after it) to stderr: where to look when a step in steady state still allocates.
//
// All work runs on one stream per device (core/cuda/context.h), so a block freed by the host can be handed
// out at once: any kernel still using it runs before any kernel that gets it next.
#pragma once

#include <cstddef>
#include <cstdint>

namespace minidet {
class Allocator;
}

namespace minidet::cuda {

struct MemoryStats {
  int64_t allocated_bytes = 0;       // in blocks handed out to tensors (rounded sizes)
  int64_t reserved_bytes = 0;        // held from cudaMalloc: allocated + cached
  int64_t peak_allocated_bytes = 0;  // high-water mark of allocated_bytes since the last reset
  int64_t device_allocations = 0;    // number of cudaMalloc calls
  int64_t cache_hits = 0;            // requests served from the cache
};

// The allocator for one GPU (all share one process-wide cache). Throws when built without CUDA.
Allocator* caching_allocator(int device);

size_t round_allocation_size(size_t nbytes);
MemoryStats memory_stats(int device = 0);
void reset_peak_memory_stats(int device = 0);
// Returns every cached (free) block to the driver with cudaFree.
void empty_cache();

// Private pools, for CUDA graphs (core/cuda/graph.h). A graph's replays write its blocks whenever they run,
// so no one else may be handed them: while a PrivatePoolScope is open, this thread's allocations on `device`
// come from the pool and its frees go back to it. release_private_pool() gives the pool's blocks to the
// device's cache once none of them is held by a tensor any more (at once, or at the last free).
uint64_t create_private_pool();
void release_private_pool(uint64_t pool, int device);
class PrivatePoolScope {
 public:
  PrivatePoolScope(uint64_t pool, int device);
  ~PrivatePoolScope();
  PrivatePoolScope(const PrivatePoolScope&) = delete;
  PrivatePoolScope& operator=(const PrivatePoolScope&) = delete;

 private:
  uint64_t previous_id_ = 0;
  int previous_device_ = -1;
};

}  // namespace minidet::cuda
