// Counters of the copies between the host and a GPU, for tests and benchmarks that want to know how often a
// step makes the host wait.
//
// minidet queues its kernels on the legacy default stream and copies with cudaMemcpy (core/copy.cpp), so
// every device-to-host copy waits for all queued work: it is a host synchronisation. A host-to-device copy
// from pageable memory would wait too, so uploads go through a pinned staging ring (core/cuda/host_staging.h)
// and do not; host_to_device_staged counts those, and host_to_device - host_to_device_staged the uploads too
// large for the ring, which did wait. Every copy goes through one function, detail::copy_bytes, which counts
// it here; nothing else in minidet calls cudaMemcpy.
//
//   const TransferCounts before = transfer_counts();
//   ... one training step ...
//   const TransferCounts step = transfer_counts() - before;   // step.device_to_host: syncs of the step
//
// The counters are process-wide atomics (all threads, all GPUs) and never reset, so a reader takes the
// difference of two snapshots. Copies of zero bytes and host-to-host copies are not counted.
#pragma once

#include <cstdint>

namespace minidet {

struct TransferCounts {
  int64_t device_to_host = 0;
  int64_t host_to_device = 0;         // every upload
  int64_t host_to_device_staged = 0;  // of those, the ones queued through the staging ring (no host wait)
  int64_t device_to_device = 0;       // between two GPUs, or within one by cudaMemcpy (not counted as a sync)

  // The copies that made the host wait for the GPU.
  int64_t host_waits() const { return device_to_host + host_to_device - host_to_device_staged; }

  TransferCounts operator-(const TransferCounts& other) const {
    return {device_to_host - other.device_to_host, host_to_device - other.host_to_device,
            host_to_device_staged - other.host_to_device_staged, device_to_device - other.device_to_device};
  }
};

TransferCounts transfer_counts();

namespace detail {
enum class TransferKind { DeviceToHost, HostToDevice, HostToDeviceStaged, DeviceToDevice };
void count_transfer(TransferKind kind);  // called by copy_bytes
}  // namespace detail

}  // namespace minidet
