// Storage: one reference-counted buffer of bytes on one device.
//
// Tensors are views over a Storage (sizes, strides, offset). Several tensors may share one Storage, so the
// buffer is freed when the last of them goes away. The version counter is bumped by every in-place write;
// autograd records it when it saves a tensor and refuses to use the tensor if it changed by backward time.
//
// A storage can be made read-only: a constant that many callers share (ops/elementwise/shared_scalar.h, the
// anchor cache) must never change under the others, and a comment saying so cannot stop a write. Every
// in-place write bumps the version, so the bump is where a write to a read-only storage fails, loudly and
// naming the constant.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/allocator.h"
#include "core/device.h"

namespace minidet {

class StorageImpl {
 public:
  StorageImpl(size_t nbytes, Device device);
  // A view of memory that `owner` keeps alive (never freed by this storage): a CUDA graph hands out its
  // fixed output buffers this way (nn/graphs), so that a tensor over them is the storage's only user.
  StorageImpl(void* data, size_t nbytes, Device device, std::shared_ptr<const void> owner);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  const Device& device() const { return device_; }

  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() {
    check_writable();
    version_.fetch_add(1, std::memory_order_relaxed);
  }
  // Throws if the storage is read-only: for a writer that must refuse before it writes.
  void check_writable() const {
    if (read_only_reason_ != nullptr) refuse_write();
  }
  // From now on every bump_version (so every in-place write) throws an Error with `reason` (a string literal:
  // it is kept, not copied). There is no way back: a shared constant stays one.
  void make_read_only(const char* reason) { read_only_reason_ = reason; }
  bool read_only() const { return read_only_reason_ != nullptr; }

  // How many StorageImpl objects exist right now (for leak tests of the autograd graph).
  static int64_t live_count();

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;        // null for adopted memory
  std::shared_ptr<const void> owner_;     // what keeps adopted memory alive
  std::atomic<uint64_t> version_{0};
  const char* read_only_reason_ = nullptr;

  [[noreturn]] void refuse_write() const;
};

using Storage = std::shared_ptr<StorageImpl>;

inline Storage make_storage(size_t nbytes, Device device) { return std::make_shared<StorageImpl>(nbytes, device); }

}  // namespace minidet
