#include "core/transfer_counts.h"

#include <atomic>

namespace minidet {

namespace {
std::atomic<int64_t> device_to_host{0}, host_to_device{0}, host_to_device_staged{0}, device_to_device{0};
}  // namespace

TransferCounts transfer_counts() {
  return {device_to_host.load(std::memory_order_relaxed), host_to_device.load(std::memory_order_relaxed),
          host_to_device_staged.load(std::memory_order_relaxed), device_to_device.load(std::memory_order_relaxed)};
}

namespace detail {

void count_transfer(TransferKind kind) {
  switch (kind) {
    case TransferKind::DeviceToHost: device_to_host.fetch_add(1, std::memory_order_relaxed); break;
    case TransferKind::HostToDevice: host_to_device.fetch_add(1, std::memory_order_relaxed); break;
    case TransferKind::HostToDeviceStaged:
      host_to_device_staged.fetch_add(1, std::memory_order_relaxed);
      break;
    case TransferKind::DeviceToDevice: device_to_device.fetch_add(1, std::memory_order_relaxed); break;
  }
}

}  // namespace detail
}  // namespace minidet
