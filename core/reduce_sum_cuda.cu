#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/reduce_sum.h"
#include "core/strided_indexer.h"

namespace minidet::detail {
namespace {

constexpr int kReduceThreads = 256;

// One block per output element (grid-stride over outputs). Each thread sums a strided share of the
// reduced elements, then the block combines the partial sums with a fixed tree, so the result has the
// same bits on every run.
template <typename T, typename Acc>
__global__ void sum_reduce_kernel(T* out, const T* in, StridedIndexer<1> kept, StridedIndexer<1> reduced,
                                  int64_t outputs, int64_t reduce_count) {
  __shared__ Acc partial[kReduceThreads];
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    int64_t base[1], off[1];
    kept.offsets(o, base);
    Acc acc = 0;
    for (int64_t r = threadIdx.x; r < reduce_count; r += blockDim.x) {
      reduced.offsets(r, off);
      acc += static_cast<Acc>(in[base[0] + off[0]]);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int width = blockDim.x / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[o] = static_cast<T>(partial[0]);
    __syncthreads();  // partial[] is reused by the next output
  }
}

}  // namespace

void sum_reduce_cuda(const Tensor& out, const Tensor& in, const ReducePlan& plan) {
  cuda::DeviceGuard guard(in.device());
  const Shape* kept_strides[1] = {&plan.kept_strides};
  const Shape* reduced_strides[1] = {&plan.reduced_strides};
  const StridedIndexer<1> kept = make_indexer<1>(plan.kept_sizes, kept_strides);
  const StridedIndexer<1> reduced = make_indexer<1>(plan.reduced_sizes, reduced_strides);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(plan.outputs, 65535));
  MINIDET_DISPATCH_NUMERIC(in.dtype(), "sum", [&] {
    {
      // Floats accumulate in double, as on the CPU, so both devices agree to float32 rounding.
      using acc_t = std::conditional_t<std::is_floating_point_v<scalar_t>, double, scalar_t>;
      sum_reduce_kernel<scalar_t, acc_t><<<blocks, kReduceThreads, 0, cuda::current_stream()>>>(
          out.data<scalar_t>(), in.data<scalar_t>(), kept, reduced, plan.outputs, plan.reduced);
      MINIDET_CUDA_LAUNCH_CHECK("sum_reduce_kernel");
    }
  });
}

}  // namespace minidet::detail
