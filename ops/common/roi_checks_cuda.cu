// The device-side half of check_rois (see roi_checks.h): one thread per RoI row; a bad row lowers a single
// device int64 to its index with atomicMin, so the FIRST bad row is reported whatever the thread order.
#include <cmath>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/common/roi_checks.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void first_bad_roi_kernel(int64_t count, int64_t columns, const T* rois, int64_t batch_size,
                                     unsigned long long* first_bad) {
  MINIDET_KERNEL_LOOP(k, count) {
    const T* row = rois + k * columns;
    const T batch = row[0];
    // Same rules as describe_bad_row on the host; written so that NaN fails every comparison.
    bool ok = isfinite(batch) && batch == floor(batch) && batch >= T(0) && batch < T(batch_size);
    for (int64_t c = 1; c < columns; ++c) ok = ok && isfinite(row[c]);
    if (!ok) atomicMin(first_bad, static_cast<unsigned long long>(k));
  }
}

}  // namespace

int64_t first_bad_roi_cuda(const Tensor& rois, int64_t batch_size) {
  cuda::DeviceGuard guard(rois.device());
  const int64_t count = rois.size(0), columns = rois.size(1);
  Tensor first_bad = full({1}, double(count), TensorOptions(kInt64, rois.device()));
  MINIDET_DISPATCH_FLOATING(rois.dtype(), "check_rois", [&] {
    first_bad_roi_kernel<scalar_t><<<cuda::blocks_for(count), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        count, columns, rois.data<scalar_t>(), batch_size,
        reinterpret_cast<unsigned long long*>(first_bad.data<int64_t>()));
    MINIDET_CUDA_LAUNCH_CHECK("first_bad_roi_kernel");
  });
  return first_bad.item<int64_t>();  // the one 8-byte device-to-host copy
}

}  // namespace minidet::ops::detail
