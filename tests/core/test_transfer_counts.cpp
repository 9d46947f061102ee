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

  before = transfer_counts();
  const Tensor doubled = device.to(kFloat64);  // a kernel on the device: no copy through the host
  CHECK((transfer_counts() - before).device_to_host == 0);
  CHECK((transfer_counts() - before).host_to_device == 0);

  before = transfer_counts();
  const std::vector<double> back = doubled.to_vector<double>();
  CHECK((transfer_counts() - before).device_to_host == 1);
  CHECK(back[9] == 9.0);
}
