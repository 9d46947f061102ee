// The host<->device copy counters (core/transfer_counts.h): CPU work counts nothing, each copy to or from a
// GPU counts once.
#include "core/factories.h"
#include "core/transfer_counts.h"
#include "tests/support.h"

using namespace minidet;

TEST_CASE("values/transfer_counts: copies between CPU tensors are not counted") {
  const TransferCounts before = transfer_counts();
  const Tensor a = arange(10.0, kFloat32);
  const Tensor b = a.clone();
  (void)b.to(kFloat64).to_vector<double>();
  const TransferCounts diff = transfer_counts() - before;
  CHECK(diff.device_to_host == 0);
  CHECK(diff.host_to_device == 0);
  CHECK(diff.device_to_device == 0);
}

MINIDET_CUDA_TEST_CASE("cuda/transfer_counts: one count per copy in each direction, none for device work") {
  const Tensor host = arange(10.0, kFloat32);
  TransferCounts before = transfer_counts();
  const Tensor device = host.to(Device::cuda());
  CHECK((transfer_counts() - before).host_to_device == 1);
  CHECK((transfer_counts() - before).host_to_device_staged == 1);  // through the pinned ring: no host wait
  CHECK((transfer_counts() - before).host_waits() == 0);

  before = transfer_counts();
  const Tensor doubled = device.to(kFloat64);  // a kernel on the device: no copy through the host
  CHECK((transfer_counts() - before).device_to_host == 0);
  CHECK((transfer_counts() - before).host_to_device == 0);

  before = transfer_counts();
  const std::vector<double> back = doubled.to_vector<double>();
  CHECK((transfer_counts() - before).device_to_host == 1);
  CHECK((transfer_counts() - before).host_waits() == 1);
  CHECK(back[9] == 9.0);
}

// The staging ring (core/cuda/host_staging.h): uploads return before the GPU has copied, so the source may be
// overwritten at once, and enough of them to wrap the ring many times must each arrive intact.
MINIDET_CUDA_TEST_CASE("cuda/host_staging: queued uploads arrive intact while the source is reused and the ring wraps") {
  const int64_t n = 3 << 20;  // 12 MiB of float32: six uploads go around the 64 MiB ring once
  Tensor host = empty({n}, kFloat32);
  float* h = host.data<float>();
  std::vector<Tensor> uploads;
  const TransferCounts before = transfer_counts();
  for (int k = 0; k < 14; ++k) {
    for (int64_t i = 0; i < n; i += 4096) h[i] = static_cast<float>(k * 100000 + i / 4096);
    uploads.push_back(host.to(Device::cuda()));  // host's bytes change right after: the ring holds a copy
  }
  CHECK((transfer_counts() - before).host_to_device_staged == 14);
  for (int k = 0; k < 14; ++k) {
    CAPTURE(k);
    const std::vector<float> back = uploads[k].to_vector<float>();
    bool intact = true;
    for (int64_t i = 0; i < n; i += 4096) intact = intact && back[i] == static_cast<float>(k * 100000 + i / 4096);
    CHECK(intact);
  }
  // Above a quarter of the ring: the plain synchronous copy, counted as a host wait.
  const Tensor big = zeros({(int64_t{17} << 20) / 4}, kFloat32);
  const TransferCounts big_before = transfer_counts();
  (void)big.to(Device::cuda());
  CHECK((transfer_counts() - big_before).host_to_device_staged == 0);
  CHECK((transfer_counts() - big_before).host_waits() == 1);
}
