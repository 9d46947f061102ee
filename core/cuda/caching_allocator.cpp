#include "core/cuda/caching_allocator.h"

#include "core/allocator.h"
#include "core/cuda/availability.h"
#include "core/error.h"

#if MINIDET_WITH_CUDA
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
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

// The private pool that allocations of this thread go to while it captures a CUDA graph (id 0: none).
struct CapturePool {
  uint64_t id = 0;
  int device = -1;
};
thread_local CapturePool t_capture_pool;

// Lets this thread make calls that a stream capture in the default (global) mode forbids, for a scope.
class CaptureModeRelaxed {
 public:
  CaptureModeRelaxed() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~CaptureModeRelaxed() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  CaptureModeRelaxed(const CaptureModeRelaxed&) = delete;
  CaptureModeRelaxed& operator=(const CaptureModeRelaxed&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

class CachingAllocator {
 public:
  void* allocate(size_t nbytes, int device) {
    if (nbytes == 0) return nullptr;
    const size_t size = round_allocation_size(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    DevicePool& pool = pool_for(device);
    // While this thread captures a CUDA graph, blocks come from (and go back to) the graph's private pool.
    const uint64_t private_id = t_capture_pool.device == device ? t_capture_pool.id : 0;
    FreeBlocks& free_blocks = private_id != 0 ? private_pools_[private_id].free_blocks : pool.free_blocks;
    void* ptr = nullptr;
    size_t block_size = size;
    auto cached = free_blocks.find(size);
    if (cached == free_blocks.end() && size <= kSmallLimit) {
      // A small request may take the smallest free block of up to twice its size. Small tensors change size
      // from step to step (a detector's proposal and box counts), and with exact bins only, each size seen
      // for the first time would cost a cudaMalloc for many steps before every bin had its blocks.
      auto larger = free_blocks.lower_bound(size);
      if (larger != free_blocks.end() && larger->first <= 2 * size) cached = larger;
    }
    if (cached != free_blocks.end()) {
      block_size = cached->first;
      ptr = cached->second;
      free_blocks.erase(cached);
      pool.stats.cache_hits++;
    } else {
      ptr = device_malloc(pool, device, size, nbytes, private_id);
    }
    if (private_id != 0) private_pools_[private_id].live++;
    live_[ptr] = {block_size, device, private_id};  // freed back into the bin of its real size
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
    auto private_pool = private_pools_.find(it->second.private_pool);
    if (private_pool != private_pools_.end()) {
      // Back to its graph's pool: only that graph's captures may reuse it. A released pool with nothing
      // live left hands its blocks to the device's cache.
      private_pool->second.free_blocks.emplace(it->second.size, ptr);
      if (--private_pool->second.live == 0 && private_pool->second.released) merge_into_device(private_pool, pool);
    } else {
      pool.free_blocks.emplace(it->second.size, ptr);
    }
    pool.stats.allocated_bytes -= static_cast<int64_t>(it->second.size);
    live_.erase(it);
  }

  uint64_t create_pool() {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t id = next_pool_id_++;
    private_pools_[id];
    return id;
  }

  void release_pool(uint64_t id, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = private_pools_.find(id);
    if (it == private_pools_.end()) return;
    it->second.released = true;
    if (it->second.live == 0) merge_into_device(it, pool_for(device));
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
  using FreeBlocks = std::multimap<size_t, void*>;  // rounded size -> block
  struct LiveBlock {
    size_t size;
    int device;
    uint64_t private_pool;  // 0: the device's cache
  };
  struct DevicePool {
    FreeBlocks free_blocks;
    MemoryStats stats;
  };
  // A CUDA graph's memory (core/cuda/graph.h): its blocks are reused only by captures into the same pool,
  // because a replay writes them again whenever it runs. Blocks still live when the graph lets go of the
  // pool (tensors a caller kept) stay out of the device's cache until the last of them is freed.
  struct PrivatePool {
    FreeBlocks free_blocks;
    int64_t live = 0;
    bool released = false;
  };

  void merge_into_device(std::unordered_map<uint64_t, PrivatePool>::iterator it, DevicePool& pool) {
    pool.free_blocks.insert(it->second.free_blocks.begin(), it->second.free_blocks.end());
    private_pools_.erase(it);
  }

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

  // Caller holds mutex_. private_id: the capture pool the block goes to (0: the device's cache), for the log.
  void* device_malloc(DevicePool& pool, int device, size_t size, size_t requested, uint64_t private_id) {
    DeviceGuard guard(Device::cuda(device));
    // cudaMalloc is not a stream operation, so a capture may call it; the thread's capture mode must allow it.
    CaptureModeRelaxed relaxed;
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
    static const bool log = std::getenv("MINIDET_CUDA_ALLOC_LOG") != nullptr;
    if (log)
      std::fprintf(stderr, "minidet: cudaMalloc #%lld on cuda:%d: %zu bytes for a request of %zu (%s), %s reserved\n",
                   static_cast<long long>(pool.stats.device_allocations), device, size, requested,
                   private_id ? ("graph pool " + std::to_string(private_id)).c_str() : "cache",
                   format_bytes(static_cast<uint64_t>(pool.stats.reserved_bytes)).c_str());
    return ptr;
  }

  std::mutex mutex_;
  std::vector<DevicePool> pools_;
  std::unordered_map<void*, LiveBlock> live_;
  std::unordered_map<uint64_t, PrivatePool> private_pools_;
  uint64_t next_pool_id_ = 1;
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

uint64_t create_private_pool() { return instance().create_pool(); }
void release_private_pool(uint64_t pool, int device) { instance().release_pool(pool, device); }

PrivatePoolScope::PrivatePoolScope(uint64_t pool, int device) : previous_id_(t_capture_pool.id),
                                                                previous_device_(t_capture_pool.device) {
  t_capture_pool = {pool, device};
}
PrivatePoolScope::~PrivatePoolScope() { t_capture_pool = {previous_id_, previous_device_}; }

#else  // CPU-only build

Allocator* caching_allocator(int) { fail_without_cuda("CUDA allocator"); }
MemoryStats memory_stats(int) { fail_without_cuda("cuda::memory_stats"); }
void reset_peak_memory_stats(int) { fail_without_cuda("cuda::reset_peak_memory_stats"); }
void empty_cache() {}
uint64_t create_private_pool() { fail_without_cuda("cuda::create_private_pool"); }
void release_private_pool(uint64_t, int) {}
PrivatePoolScope::PrivatePoolScope(uint64_t, int) { fail_without_cuda("cuda::PrivatePoolScope"); }
PrivatePoolScope::~PrivatePoolScope() = default;

#endif

}  // namespace minidet::cuda
