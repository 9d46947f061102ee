#include "core/cuda/caching_allocator.h"

#include "core/allocator.h"
#include "core/cuda/availability.h"
#include "core/error.h"

#if MINIDET_WITH_CUDA
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#endif

namespace minidet::cuda {

namespace {
constexpr size_t kSmallQuantum = 512;
constexpr size_t kSmallLimit = size_t(1) << 20;  // up to here, bins are multiples of kSmallQuantum
}  // namespace

size_t round_allocation_size(size_t nbytes) {
  if (nbytes <= kSmallLimit) return (nbytes + kSmallQuantum - 1) / kSmallQuantum * kSmallQuantum;
  MINIDET_CHECK(nbytes <= (size_t(1) << 62), "CUDA allocator: ", nbytes, " bytes is beyond any GPU");
  // Largest power of two <= nbytes, then the first of its four quarter steps that fits.
  size_t power = kSmallLimit;
  while (power * 2 <= nbytes) power *= 2;
  const size_t step = power / 4;
  return (nbytes + step - 1) / step * step;
}

#if MINIDET_WITH_CUDA
namespace {

class CachingAllocator {
 public:
  void* allocate(size_t nbytes, int device) {
    if (nbytes == 0) return nullptr;
    const size_t size = round_allocation_size(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    DevicePool& pool = pool_for(device);
    void* ptr = nullptr;
    size_t block_size = size;
    auto cached = pool.free_blocks.find(size);
    if (cached == pool.free_blocks.end() && size <= kSmallLimit) {
      // A small request may take the smallest free block of up to twice its size. Small tensors change size
      // from step to step (a detector's proposal and box counts), and with exact bins only, each size seen
      // for the first time would cost a cudaMalloc for many steps before every bin had its blocks.
      auto larger = pool.free_blocks.lower_bound(size);
      if (larger != pool.free_blocks.end() && larger->first <= 2 * size) cached = larger;
    }
    if (cached != pool.free_blocks.end()) {
      block_size = cached->first;
      ptr = cached->second;
      pool.free_blocks.erase(cached);
      pool.stats.cache_hits++;
    } else {
      ptr = device_malloc(pool, device, size, nbytes);
    }
    live_[ptr] = {block_size, device};  // freed back into the bin of its real size
    pool.stats.allocated_bytes += static_cast<int64_t>(block_size);
    if (pool.stats.allocated_bytes > pool.stats.peak_allocated_bytes)
      pool.stats.peak_allocated_bytes = pool.stats.allocated_bytes;
    return ptr;
  }

  void deallocate(void* ptr) {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    MINIDET_CHECK(it != live_.end(), "CUDA caching allocator: freeing a pointer it did not allocate");
    DevicePool& pool = pool_for(it->second.device);
    pool.free_blocks.emplace(it->second.size, ptr);
    pool.stats.allocated_bytes -= static_cast<int64_t>(it->second.size);
    live_.erase(it);
  }

  MemoryStats stats(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return pool_for(device).stats;
  }

  void reset_peak(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    MemoryStats& stats = pool_for(device).stats;
    stats.peak_allocated_bytes = stats.allocated_bytes;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t device = 0; device < pools_.size(); ++device) release_cached(static_cast<int>(device));
  }

 private:
  struct LiveBlock {
    size_t size;
    int device;
  };
  struct DevicePool {
    std::multimap<size_t, void*> free_blocks;  // rounded size -> block
    MemoryStats stats;
  };

  DevicePool& pool_for(int device) {
    if (static_cast<size_t>(device) >= pools_.size()) pools_.resize(device + 1);
    return pools_[device];
  }

  // Caller holds mutex_.
  void release_cached(int device) {
    DevicePool& pool = pools_[device];
    if (pool.free_blocks.empty()) return;
    DeviceGuard guard(Device::cuda(device));
    for (auto& [size, ptr] : pool.free_blocks) {
      MINIDET_CUDA_CHECK(cudaFree(ptr));
      pool.stats.reserved_bytes -= static_cast<int64_t>(size);
    }
    pool.free_blocks.clear();
  }

  // What a reader needs to act on an out-of-memory error: the request, what minidet's cache holds (tensors
  // in use, and cached blocks it could give back), and what the whole device has left, which also counts
  // other processes and the CUDA context.
  [[noreturn]] static void fail_out_of_memory(const DevicePool& pool, int device, size_t size, size_t requested) {
    size_t free_bytes = 0, total_bytes = 0;
    std::string device_memory = "free/total unknown";
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
      device_memory = format_bytes(free_bytes) + " free of " + format_bytes(total_bytes);
    (void)cudaGetLastError();
    MINIDET_FAIL("CUDA out of memory: tried to allocate ", format_bytes(requested), " (", requested, " bytes, ",
                 size, " rounded) on cuda:", device, "; minidet's cache holds ",
                 format_bytes(static_cast<uint64_t>(pool.stats.allocated_bytes)), " allocated to tensors and ",
                 format_bytes(static_cast<uint64_t>(pool.stats.reserved_bytes)), " reserved from the driver; the device has ",
                 device_memory, ". Free tensors you no longer need or use a smaller batch");
  }

  // Caller holds mutex_.
  void* device_malloc(DevicePool& pool, int device, size_t size, size_t requested) {
    DeviceGuard guard(Device::cuda(device));
    void* ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // out-of-memory is not sticky; clear it and retry with an empty cache
      release_cached(device);
      err = cudaMalloc(&ptr, size);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // cleared, so the process can go on (smaller batch, free tensors, CPU)
      fail_out_of_memory(pool, device, size, requested);
    }
    MINIDET_CUDA_CHECK(err);
    pool.stats.reserved_bytes += static_cast<int64_t>(size);
    pool.stats.device_allocations++;
    return ptr;
  }

  std::mutex mutex_;
  std::vector<DevicePool> pools_;
  std::unordered_map<void*, LiveBlock> live_;
};

// Never destroyed: tensors in static objects may be freed after the CUDA runtime has shut down, and
// cudaFree at that point fails. The driver reclaims everything when the process ends.
CachingAllocator& instance() {
  static CachingAllocator* allocator = new CachingAllocator();
  return *allocator;
}

// The Allocator face of the cache for one GPU, as Storage sees it.
class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  void* allocate(size_t nbytes) override { return instance().allocate(nbytes, device_); }
  void deallocate(void* ptr) override { instance().deallocate(ptr); }

 private:
  int device_;
};

}  // namespace

void check_device_index(int device, const char* what) {
  MINIDET_CHECK(device >= 0 && device < device_count(), what, ": cuda:", device, " does not exist (",
                device_count(), " GPU(s) visible)");
}

Allocator* caching_allocator(int device) {
  check_device_index(device, "CUDA allocator");
  static std::mutex mutex;
  static std::vector<DeviceAllocator*>* allocators = new std::vector<DeviceAllocator*>();
  std::lock_guard<std::mutex> lock(mutex);
  while (static_cast<int>(allocators->size()) <= device)
    allocators->push_back(new DeviceAllocator(static_cast<int>(allocators->size())));
  return (*allocators)[device];
}
MemoryStats memory_stats(int device) {
  check_device_index(device, "cuda::memory_stats");
  return instance().stats(device);
}
void reset_peak_memory_stats(int device) {
  check_device_index(device, "cuda::reset_peak_memory_stats");
  instance().reset_peak(device);
}
void empty_cache() { instance().empty_cache(); }

#else  // CPU-only build

namespace {
[[noreturn]] void no_cuda(const char* what) {
  MINIDET_FAIL(what, ": minidet was built without CUDA (configure with nvcc available and MINIDET_CUDA=ON)");
}
}  // namespace

Allocator* caching_allocator(int) { no_cuda("CUDA allocator"); }
MemoryStats memory_stats(int) { no_cuda("cuda::memory_stats"); }
void reset_peak_memory_stats(int) { no_cuda("cuda::reset_peak_memory_stats"); }
void empty_cache() {}

#endif

}  // namespace minidet::cuda
