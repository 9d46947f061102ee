// See host_staging.h.
#include "core/cuda/host_staging.h"

#if MINIDET_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/device.h"

namespace minidet::cuda {
namespace {

class StagingRing {
 public:
  explicit StagingRing(int device) : device_(device) {
    DeviceGuard guard(Device::cuda(device));
    if (cudaHostAlloc(reinterpret_cast<void**>(&base_), kStagingRingBytes, cudaHostAllocDefault) != cudaSuccess) {
      (void)cudaGetLastError();  // no pinned memory to be had: every copy falls back to cudaMemcpy
      base_ = nullptr;
    }
  }
  // Lives to the end of the process (see ring_for): at exit the driver frees the pinned memory.

  bool copy(void* dst, const void* src, size_t nbytes) {
    if (base_ == nullptr || nbytes > kMaxStagedCopyBytes) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceGuard guard(Device::cuda(device_));
    const size_t size = (nbytes + 255) / 256 * 256;  // chunks stay 256-byte aligned
    if (head_ + size > kStagingRingBytes) head_ = 0;
    const size_t begin = head_, end = head_ + size;
    reclaim(begin, end);
    std::memcpy(base_ + begin, src, nbytes);
    MINIDET_CUDA_CHECK(cudaMemcpyAsync(dst, base_ + begin, nbytes, cudaMemcpyHostToDevice, current_stream()));
    const cudaEvent_t done = take_event();
    MINIDET_CUDA_CHECK(cudaEventRecord(done, current_stream()));
    in_flight_.push_back({begin, end, done});
    head_ = end;
    return true;
  }

 private:
  struct Chunk {
    size_t begin, end;
    cudaEvent_t done;
  };

  // Frees the chunks the GPU has finished copying, and waits for those that overlap [begin, end). The
  // chunks complete in queue order, so it is always the oldest that is waited for.
  void reclaim(size_t begin, size_t end) {
    auto overlaps = [&](const Chunk& c) { return c.begin < end && begin < c.end; };
    while (!in_flight_.empty()) {
      Chunk& oldest = in_flight_.front();
      if (std::any_of(in_flight_.begin(), in_flight_.end(), overlaps)) {
        MINIDET_CUDA_CHECK(cudaEventSynchronize(oldest.done));
      } else if (cudaEventQuery(oldest.done) != cudaSuccess) {
        (void)cudaGetLastError();  // cudaErrorNotReady: still copying, and not in the way
        break;
      }
      free_events_.push_back(oldest.done);
      in_flight_.pop_front();
    }
  }

  cudaEvent_t take_event() {
    if (!free_events_.empty()) {
      const cudaEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
    cudaEvent_t e;
    MINIDET_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  int device_;
  char* base_ = nullptr;
  size_t head_ = 0;
  std::mutex mutex_;
  std::deque<Chunk> in_flight_;
  std::vector<cudaEvent_t> free_events_;
};

StagingRing& ring_for(int device) {
  static std::mutex mutex;
  static std::vector<StagingRing*> rings;  // never freed: copies may be queued until the process ends
  std::lock_guard<std::mutex> lock(mutex);
  if (device >= static_cast<int>(rings.size())) rings.resize(device + 1, nullptr);
  if (rings[device] == nullptr) rings[device] = new StagingRing(device);
  return *rings[device];
}

}  // namespace

bool copy_to_device_staged(void* dst, const void* src, size_t nbytes, int device) {
  if (nbytes > kMaxStagedCopyBytes) return false;
  return ring_for(device).copy(dst, src, nbytes);
}

}  // namespace minidet::cuda

#else  // built without CUDA: there is no device to copy to

namespace minidet::cuda {
bool copy_to_device_staged(void*, const void*, size_t, int) { return false; }
}  // namespace minidet::cuda

#endif
