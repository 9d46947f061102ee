// CUDA nonzero: cub::DeviceSelect::Flagged keeps the flat indices 0..n-1 whose flag (x != 0) is set, in
// order, and writes how many it kept to device memory. Copying that count to the host is the op's one
// synchronisation: the output tensor cannot be allocated before K is known.
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/indexing/nonzero_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
struct IsNonZero {
  __host__ __device__ bool operator()(T value) const { return value != T(0); }
};

constexpr int kMaxDims = 16;
struct UnravelSizes {
  int64_t sizes[kMaxDims];
  int ndim;
};

__global__ void unravel_kernel(int64_t count, const int64_t* flat, UnravelSizes shape, int64_t* coords) {
  MINIDET_KERNEL_LOOP(k, count) {
    int64_t rest = flat[k];
    for (int d = shape.ndim - 1; d >= 0; --d) {
      coords[k * shape.ndim + d] = rest % shape.sizes[d];
      rest /= shape.sizes[d];
    }
  }
}

}  // namespace

Tensor flat_nonzero_cuda(const Tensor& x) {
  cuda::DeviceGuard guard(x.device());
  const int64_t n = x.numel();
  const TensorOptions index_options(kInt64, x.device());
  Tensor selected = empty({n}, index_options);  // room for every index; trimmed once K is known
  Tensor count = empty({1}, index_options);
  MINIDET_DISPATCH_ALL(x.dtype(), "nonzero", [&] {
    const thrust::counting_iterator<int64_t> positions(0);
    const auto flags = thrust::make_transform_iterator(x.data<scalar_t>(), IsNonZero<scalar_t>());
    int64_t* out = selected.data<int64_t>();
    int64_t* num_selected = count.data<int64_t>();
    size_t temp_bytes = 0;
    MINIDET_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, temp_bytes, positions, flags, out, num_selected, n,
                                                  cuda::current_stream()));
    Tensor temp = empty({static_cast<int64_t>(temp_bytes) + 1}, TensorOptions(kUInt8, x.device()));
    MINIDET_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.raw_data(), temp_bytes, positions, flags, out, num_selected,
                                                  n, cuda::current_stream()));
  });
  // The synchronisation: K decides the output's size.
  const int64_t kept = count.item<int64_t>();
  return selected.narrow(0, 0, kept).clone();
}

void unravel_indices_cuda(const Tensor& flat, const Shape& sizes, const Tensor& coords) {
  cuda::DeviceGuard guard(flat.device());
  MINIDET_CHECK(sizes.size() <= static_cast<size_t>(kMaxDims), "nonzero: at most ", kMaxDims,
                " dims on CUDA, got ", sizes.size());
  UnravelSizes shape{};
  shape.ndim = static_cast<int>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) shape.sizes[d] = sizes[d];
  const int64_t count = flat.numel();
  unravel_kernel<<<cuda::blocks_for(count), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
      count, flat.data<int64_t>(), shape, coords.data<int64_t>());
  MINIDET_CUDA_LAUNCH_CHECK("unravel_kernel");
}

}  // namespace minidet::ops::detail
