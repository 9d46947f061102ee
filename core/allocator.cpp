#include "core/allocator.h"

#include <climits>
#include <cstdio>
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/cuda/availability.h"
#include "core/cuda/caching_allocator.h"
#include "core/error.h"

namespace minidet {
namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    // std::aligned_alloc wants the size to be a multiple of the alignment.
    const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* ptr = std::aligned_alloc(kCpuAlignment, rounded);
    MINIDET_CHECK(ptr != nullptr, "CPU allocator: out of memory allocating ", format_bytes(nbytes), " (", nbytes,
                  " bytes)");
    return ptr;
  }
  void deallocate(void* ptr) override { std::free(ptr); }
};

}  // namespace

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < sizeof units / sizeof units[0]) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  return text;
}

void retain_freed_host_memory() {
#if defined(__GLIBC__)
  // Both: setting either one stops glibc's own adjustment of the other (measured: either alone was slower
  // than glibc's default).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

Allocator* allocator_for(const Device& device) {
  static CpuAllocator cpu_allocator;
  if (device.is_cpu()) return &cpu_allocator;
  MINIDET_CHECK(MINIDET_WITH_CUDA, "cannot allocate on ", device, ": minidet was built without CUDA");
  MINIDET_CHECK(cuda::is_available(), "cannot allocate on ", device, ": no CUDA GPU is visible");
  MINIDET_CHECK(device.index >= 0 && device.index < cuda::device_count(), "cannot allocate on ", device,
                ": only ", cuda::device_count(), " GPU(s) visible");
  return cuda::caching_allocator(device.index);
}

}  // namespace minidet
