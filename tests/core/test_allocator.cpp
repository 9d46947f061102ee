// Allocators and storage lifetime: CPU alignment, the CUDA allocator's size bins (pure arithmetic, so it is
// tested on the CPU), leak counters, the CUDA caching allocator's statistics, and out-of-memory errors.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/allocator.h"
#include "core/cuda/caching_allocator.h"
#include "core/factories.h"
#include "tests/support.h"

using namespace minidet;

namespace {
constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;
bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }
}  // namespace

TEST_CASE("values/allocator: fresh CPU tensors are 64-byte aligned") {
  // One cache line and the widest SIMD load: kernels may assume it for the first element of a new tensor.
  CHECK(kCpuAlignment == 64);
  for (int64_t n : {1, 3, 15, 16, 17, 63, 64, 65, 1000, 1 << 20}) {
    for (DType d : {kFloat32, kFloat64, kUInt8}) {
      const Tensor t = empty({n}, d);
      INFO("numel " << n << " dtype " << dtype_name(d));
      CHECK(aligned64(t.raw_data()));
      CHECK(t.storage()->nbytes() == static_cast<size_t>(n) * element_size(d));
    }
  }
}

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
TEST_CASE("values/allocator: after retain_freed_host_memory a freed 16 MiB tensor stays in the heap") {
  // glibc's default serves a 16 MiB block with mmap (its threshold starts at 128 KiB) and unmaps it on
  // free; retained, the block comes from the heap and stays there, free, for the next one.
  retain_freed_host_memory();
  const size_t free_before = mallinfo2().fordblks;
  { const Tensor big = empty({4 << 20}, kFloat32); }
  CHECK(mallinfo2().fordblks >= free_before + (16u << 20) - (1u << 20));
}
#endif

TEST_CASE("values/allocator: 0-byte CPU tensors own no memory") {
  const Tensor z = empty({0, 5});
  CHECK(z.storage()->nbytes() == 0);
  CHECK(z.storage()->data() == nullptr);  // nothing was allocated at all
  CHECK(z.clone().numel() == 0);
  CHECK(z.to(kFloat64).numel() == 0);
}

TEST_CASE("values/allocator: round_allocation_size bins below 1 MiB are multiples of 512 bytes") {
  using cuda::round_allocation_size;
  CHECK(round_allocation_size(0) == 0);
  CHECK(round_allocation_size(1) == 512);
  CHECK(round_allocation_size(512) == 512);
  CHECK(round_allocation_size(513) == 1024);
  CHECK(round_allocation_size(1 * kMiB - 1) == 1 * kMiB);
  CHECK(round_allocation_size(1 * kMiB) == 1 * kMiB);
  for (size_t n = 1; n <= kMiB; n += 97) {
    const size_t r = round_allocation_size(n);
    REQUIRE(r % 512 == 0);
    REQUIRE(r >= n);
    REQUIRE(r - n < 512);  // the smallest multiple that fits
  }
}

TEST_CASE("values/allocator: round_allocation_size uses four steps per power of two above 1 MiB") {
  using cuda::round_allocation_size;
  CHECK(round_allocation_size(kMiB + 1) == kMiB + 256 * kKiB);         // 1.25 MiB
  CHECK(round_allocation_size(kMiB + 256 * kKiB + 1) == 3 * kMiB / 2);  // 1.5 MiB
  CHECK(round_allocation_size(7 * kMiB / 4 + 1) == 2 * kMiB);           // past 1.75: the next power
  CHECK(round_allocation_size(2 * kMiB) == 2 * kMiB);                   // exact sizes stay
  CHECK(round_allocation_size(2 * kMiB + 1) == 5 * kMiB / 2);           // steps of 512 KiB now
  CHECK(round_allocation_size(1024 * kMiB + 1) == 1280 * kMiB);         // 1 GiB + 1 -> 1.25 GiB

  size_t previous = 0;
  for (size_t n = kMiB + 1; n < 600 * kMiB; n = n + n / 7 + 12345) {
    const size_t r = round_allocation_size(n);
    size_t power = kMiB;
    while (power * 2 <= n) power *= 2;
    INFO("n = " << n << ", rounded = " << r);
    REQUIRE(r >= n);
    REQUIRE(r % (power / 4) == 0);  // one of 2^k, 1.25 * 2^k, 1.5 * 2^k, 1.75 * 2^k (or 2^(k+1))
    REQUIRE(r - n < power / 4);     // so the waste is under a quarter of 2^k <= n: at most 25%
    REQUIRE(r >= previous);         // bins never shrink as requests grow
    previous = r;
  }
}

TEST_CASE("values/storage: live counters return to baseline when tensors go away") {
  // The leak tests of autograd rely on these counters; they must count exactly.
  const int64_t tensors0 = TensorImpl::live_count(), storages0 = StorageImpl::live_count();
  {
    const Tensor a = zeros({4, 4});
    const Tensor v1 = a.t(), v2 = a.select(0, 1);  // views: new TensorImpls over the same storage
    CHECK(TensorImpl::live_count() == tensors0 + 3);
    CHECK(StorageImpl::live_count() == storages0 + 1);
    const Tensor c = a.clone();  // a copy: a new storage
    CHECK(StorageImpl::live_count() == storages0 + 2);
  }
  CHECK(TensorImpl::live_count() == tensors0);
  CHECK(StorageImpl::live_count() == storages0);
}

TEST_CASE("values/storage: a view keeps its storage alive after the base is gone") {
  const int64_t storages0 = StorageImpl::live_count();
  Tensor row;
  {
    const Tensor base = arange(6).view({2, 3});
    row = base.select(0, 1);
  }
  CHECK(StorageImpl::live_count() == storages0 + 1);  // still held by the view
  CHECK(row.to_vector<int64_t>() == std::vector<int64_t>{3, 4, 5});
  row = Tensor();
  CHECK(StorageImpl::live_count() == storages0);
}

MINIDET_CUDA_TEST_CASE("cuda/allocator: a freed block is reused from the cache") {
  // An unusual size, so no earlier test left a block in this bin.
  const int64_t n = (3 * kMiB + 4 * 123) / 4;  // float32 elements
  const size_t binned = cuda::round_allocation_size(static_cast<size_t>(n) * 4);
  cuda::empty_cache();  // start with no cached blocks, so the first request must miss
  const cuda::MemoryStats s0 = cuda::memory_stats();
  void* first = nullptr;
  {
    const Tensor a = empty({n}, Device::cuda());
    first = a.raw_data();
    const cuda::MemoryStats s1 = cuda::memory_stats();
    CHECK(s1.device_allocations == s0.device_allocations + 1);  // a miss: one cudaMalloc
    CHECK(s1.allocated_bytes == s0.allocated_bytes + static_cast<int64_t>(binned));
    CHECK(s1.reserved_bytes == s0.reserved_bytes + static_cast<int64_t>(binned));
  }
  const cuda::MemoryStats s2 = cuda::memory_stats();
  CHECK(s2.allocated_bytes == s0.allocated_bytes);  // back to the tensors' total
  CHECK(s2.reserved_bytes == s0.reserved_bytes + static_cast<int64_t>(binned));  // but kept in the cache
  {
    const Tensor b = empty({n}, Device::cuda());
    const cuda::MemoryStats s3 = cuda::memory_stats();
    CHECK(s3.cache_hits == s2.cache_hits + 1);
    CHECK(s3.device_allocations == s2.device_allocations);  // no new cudaMalloc
    CHECK(b.raw_data() == first);                            // the very same block
  }
  // A request of another size that rounds to the same bin is served by the same block too.
  const int64_t n2 = n - 100;
  REQUIRE(cuda::round_allocation_size(static_cast<size_t>(n2) * 4) == binned);
  const int64_t hits = cuda::memory_stats().cache_hits;
  const Tensor c = empty({n2}, Device::cuda());
  CHECK(c.raw_data() == first);
  CHECK(cuda::memory_stats().cache_hits == hits + 1);
}

MINIDET_CUDA_TEST_CASE("cuda/allocator: a small request takes a cached block of up to twice its size") {
  cuda::empty_cache();  // only the block below is cached
  const size_t block = cuda::round_allocation_size(400 * 1024);
  void* first = nullptr;
  {
    const Tensor a = empty({400 * 1024}, TensorOptions(kUInt8, Device::cuda()));
    first = a.raw_data();
  }
  const cuda::MemoryStats s0 = cuda::memory_stats();
  {
    const Tensor b = empty({300 * 1024}, TensorOptions(kUInt8, Device::cuda()));  // 400 KiB <= 2 x 300 KiB
    const cuda::MemoryStats s1 = cuda::memory_stats();
    CHECK(b.raw_data() == first);
    CHECK(s1.device_allocations == s0.device_allocations);  // no cudaMalloc
    CHECK(s1.allocated_bytes == s0.allocated_bytes + static_cast<int64_t>(block));  // the whole block counts
  }
  CHECK(cuda::memory_stats().allocated_bytes == s0.allocated_bytes);  // back in its own bin
  const Tensor c = empty({150 * 1024}, TensorOptions(kUInt8, Device::cuda()));  // 400 KiB > 2 x 150 KiB: a miss
  CHECK(c.raw_data() != first);
  CHECK(cuda::memory_stats().device_allocations == s0.device_allocations + 1);
}

MINIDET_CUDA_TEST_CASE("cuda/allocator: allocated reserved and peak stay consistent") {
  cuda::reset_peak_memory_stats();
  const cuda::MemoryStats s0 = cuda::memory_stats();
  CHECK(s0.peak_allocated_bytes == s0.allocated_bytes);  // reset sets the peak to the current total
  CHECK(s0.reserved_bytes >= s0.allocated_bytes);
  const size_t big = 64 * kMiB;  // a power of two: its own bin size
  {
    const Tensor t = empty({static_cast<int64_t>(big)}, TensorOptions(kUInt8, Device::cuda()));
    const cuda::MemoryStats s1 = cuda::memory_stats();
    CHECK(s1.allocated_bytes == s0.allocated_bytes + static_cast<int64_t>(big));
    CHECK(s1.reserved_bytes >= s1.allocated_bytes);
    CHECK(s1.peak_allocated_bytes == s1.allocated_bytes);
  }
  const cuda::MemoryStats s2 = cuda::memory_stats();
  CHECK(s2.allocated_bytes == s0.allocated_bytes);
  CHECK(s2.peak_allocated_bytes == s0.allocated_bytes + static_cast<int64_t>(big));  // the high-water mark stays
  cuda::reset_peak_memory_stats();
  CHECK(cuda::memory_stats().peak_allocated_bytes == s2.allocated_bytes);
}

MINIDET_CUDA_TEST_CASE("cuda/allocator: empty_cache returns cached blocks to the driver") {
  {
    const Tensor t = empty({5 * static_cast<int64_t>(kMiB)}, Device::cuda());
  }
  const cuda::MemoryStats before = cuda::memory_stats();
  CHECK(before.reserved_bytes > before.allocated_bytes);  // the freed block is cached
  cuda::empty_cache();
  const cuda::MemoryStats after = cuda::memory_stats();
  CHECK(after.reserved_bytes == after.allocated_bytes);  // nothing cached any more
  CHECK(after.allocated_bytes == before.allocated_bytes);  // live tensors are untouched
}

MINIDET_CUDA_TEST_CASE("cuda/allocator: 0-byte tensors allocate nothing") {
  const cuda::MemoryStats s0 = cuda::memory_stats();
  Tensor z = empty({0, 3}, Device::cuda());
  CHECK(z.storage()->data() == nullptr);
  CHECK(z.is_cuda());
  z.fill_(1);  // no-ops, but must not launch a kernel on a null pointer
  CHECK(z.clone().numel() == 0);
  CHECK(z.cpu().sizes() == Shape{0, 3});
  const cuda::MemoryStats s1 = cuda::memory_stats();
  CHECK(s1.allocated_bytes == s0.allocated_bytes);
  CHECK(s1.device_allocations == s0.device_allocations);
  CHECK(s1.cache_hits == s0.cache_hits);
}

TEST_CASE("values/allocator: format_bytes prints powers of 1024 with two decimals") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(uint64_t(1) << 40) == "1.00 TiB");
  CHECK(format_bytes(uint64_t(1) << 50) == "1.00 PiB");
}

// 2^48 float32 elements are 1 PiB, beyond any machine's address space (47 bits of user space on x86-64),
// so the request fails whatever the kernel's overcommit policy. AddressSanitizer aborts on such a request
// unless ASAN_OPTIONS has allocator_may_return_null=1 (scripts/asan.sh and gpu-check.sh set it).
TEST_CASE("errors/allocator: an absurd CPU allocation says how much was asked, and memory still works") {
#if defined(__SANITIZE_ADDRESS__)
  const char* options = std::getenv("ASAN_OPTIONS");
  if (options == nullptr || std::string(options).find("allocator_may_return_null=1") == std::string::npos) {
    MESSAGE("skipped under AddressSanitizer without ASAN_OPTIONS=allocator_may_return_null=1");
    return;
  }
#endif
  CHECK_THROWS_CONTAINING(empty({int64_t(1) << 48}),
                          "CPU allocator: out of memory allocating 1.00 PiB (1125899906842624 bytes)");
  CHECK(full({1000}, 2.0f).to_vector<float>() == std::vector<float>(1000, 2.0f));
}

// 2^40 float32 elements are 4 TiB, more than any GPU has: cudaMalloc fails, the cache is emptied and the
// call retried once, then the error says what was asked and what is held; the CUDA error is cleared, so
// the same process allocates and runs kernels afterwards.
MINIDET_CUDA_TEST_CASE("cuda/allocator: an absurd request throws a clear out-of-memory error, then work goes on") {
  const Tensor held = zeros({1 << 20}, Device::cuda());  // 4 MiB in use, so "allocated" is not zero
  const cuda::MemoryStats before = cuda::memory_stats();
  std::string message;
  try {
    (void)empty({int64_t(1) << 40}, Device::cuda());
  } catch (const Error& e) {
    message = e.message();
  }
  INFO("message: ", message);
  CHECK(message.rfind("CUDA out of memory: tried to allocate 4.00 TiB (4398046511104 bytes, ", 0) == 0);
  CHECK(message.find(" on cuda:0; minidet's cache holds ") != std::string::npos);
  CHECK(message.find(format_bytes(static_cast<uint64_t>(before.allocated_bytes)) + " allocated to tensors") !=
        std::string::npos);
  CHECK(message.find(" reserved from the driver; the device has ") != std::string::npos);
  CHECK(message.find(" free of ") != std::string::npos);  // cudaMemGetInfo answered
  CHECK(cuda::memory_stats().allocated_bytes == before.allocated_bytes);  // the failed request holds nothing

  Tensor after = full({1000}, 3.0f, Device::cuda());  // a fresh block and a fill kernel
  CHECK(after.clone().cpu().to_vector<float>() == std::vector<float>(1000, 3.0f));  // and a copy kernel
  CHECK(held.cpu().to_vector<float>()[0] == 0.0f);
}
