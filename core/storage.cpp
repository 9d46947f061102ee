#include "core/storage.h"

#include <utility>

#include "core/error.h"

namespace minidet {
namespace {
std::atomic<int64_t> g_live_storages{0};
}

StorageImpl::StorageImpl(size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), allocator_(allocator_for(device)) {
  data_ = allocator_->allocate(nbytes);
  g_live_storages.fetch_add(1, std::memory_order_relaxed);
}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device, std::shared_ptr<const void> owner)
    : data_(data), nbytes_(nbytes), device_(device), owner_(std::move(owner)) {
  g_live_storages.fetch_add(1, std::memory_order_relaxed);
}

StorageImpl::~StorageImpl() {
  if (data_ != nullptr && allocator_ != nullptr) allocator_->deallocate(data_);
  g_live_storages.fetch_sub(1, std::memory_order_relaxed);
}

void StorageImpl::refuse_write() const {
  detail::throw_error(detail::compose("cannot write to a read-only tensor: ", read_only_reason_,
                                      " (clone() it for a copy that may change)"),
                      __FILE__, __LINE__);
}

int64_t StorageImpl::live_count() { return g_live_storages.load(std::memory_order_relaxed); }

}  // namespace minidet
