#include "core/accumulate.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/strided_indexer.h"

namespace minidet::detail {
namespace {
template <typename T>
__global__ void add_into_kernel(int64_t n, StridedIndexer<2> ix, T* out, const T* in) {
  MINIDET_KERNEL_LOOP(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    out[off[0]] += in[off[1]];
  }
}
}  // namespace

void add_into_cuda(const Tensor& dst, const Tensor& src) {
  cuda::DeviceGuard guard(dst.device());
  const Shape* strides[2] = {&dst.strides(), &src.strides()};
  const StridedIndexer<2> ix = make_indexer<2>(dst.sizes(), strides);
  const int64_t n = dst.numel();
  MINIDET_DISPATCH_FLOATING(dst.dtype(), "add_into", [&] {
    add_into_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, ix, dst.data<scalar_t>(), src.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("add_into_kernel");
  });
}
}  // namespace minidet::detail
