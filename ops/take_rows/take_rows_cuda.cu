#include <limits>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/take_rows/take_rows_kernels.h"

namespace minidet::ops::detail {
namespace {

// One thread per output element; the C columns of a row are consecutive threads, so reads and writes coalesce.
template <typename T>
__global__ void take_rows_kernel(int64_t n, int64_t rows, int64_t columns, int64_t count, T* out, const T* x,
                                 const int64_t* index) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t c = i % columns, bt = i / columns, b = bt / count;
  const int64_t row = index[bt];
  out[i] = (row >= 0 && row < rows) ? x[(b * rows + row) * columns + c] : std::numeric_limits<T>::quiet_NaN();
}

}  // namespace

void take_rows_cuda(const Tensor& out, const Tensor& x, const Tensor& index) {
  cuda::DeviceGuard guard(out.device());
  const int64_t n = out.numel();
  MINIDET_DISPATCH_FLOATING(x.dtype(), "take_rows", [&] {
    take_rows_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, x.size(1), x.size(2), index.size(1), out.data<scalar_t>(), x.data<scalar_t>(), index.data<int64_t>());
    MINIDET_CUDA_LAUNCH_CHECK("take_rows_kernel");
  });
}

}  // namespace minidet::ops::detail
