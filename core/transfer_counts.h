// Counters of the copies between the host and a GPU, for tests and benchmarks that want to know how often a
// step makes the host wait.
//
// minidet queues its kernels on the legacy default stream and copies with cudaMemcpy (core/copy.cpp), so
// every device-to-host copy waits for all queued work: it is a host synchronisation. A host-to-device copy
// from pageable memory waits too (the driver stages the bytes before the call returns). Every such copy goes
// through one function, detail::copy_bytes, which counts it here; nothing else in minidet calls cudaMemcpy.
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
  int64_t host_to_device = 0;
  int64_t device_to_device = 0;  // between two GPUs, or within one by cudaMemcpy (not counted as a sync)

  TransferCounts operator-(const TransferCounts& other) const {
    return {device_to_host - other.device_to_host, host_to_device - other.host_to_device,
            device_to_device - other.device_to_device};
  }
};

TransferCounts transfer_counts();

namespace detail {
enum class TransferKind { DeviceToHost, HostToDevice, DeviceToDevice };
void count_transfer(TransferKind kind);  // called by copy_bytes
}  // namespace detail

}  // namespace minidet
