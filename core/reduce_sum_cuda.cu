// CUDA sums over dims. Three shapes of work, each deterministic (the split depends on the shape only,
// never on timing, and every combine is a fixed tree or a fixed loop; no atomics):
//
//   few reduced elements per output (a bias gradient over a small batch, the images of a batched GEMM):
//     one THREAD per output sums its elements in order. A block per output would leave most threads idle.
//   few outputs, many reduced elements (a loss summed to a scalar, a bias gradient over 8 x 256 x 256
//     pixels): each output's range is cut into fixed slices; one block per (slice, output) writes a partial
//     sum, and a second kernel adds the partials of each output with a fixed tree. One block per output
//     would keep a single SM busy while the rest of the GPU waits.
//   otherwise: one BLOCK per output, a strided share per thread, then a fixed tree over the block.
#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "core/reduce_sum.h"
#include "core/strided_indexer.h"

namespace minidet::detail {
namespace {

constexpr int kReduceThreads = 256;
// At most this many reduced elements: one thread per output.
constexpr int64_t kSerialReduceMax = 64;
// Each slice of a split reduction covers about this many elements (16 per thread of a block).
constexpr int64_t kSliceElements = 16 * kReduceThreads;
// Split only while the outputs alone give fewer blocks than this (a few per SM on current GPUs).
constexpr int64_t kSplitBelowOutputs = 512;
constexpr int64_t kMaxSlices = 1024;

// The storage offset of reduced element r. The common case, one contiguous or strided run, needs no division.
__device__ __forceinline__ int64_t reduced_offset(const StridedIndexer<1>& reduced, int64_t r) {
  if (reduced.ndim == 1) return r * reduced.strides[0][0];
  int64_t off[1];
  reduced.offsets(r, off);
  return off[0];
}

__device__ __forceinline__ int64_t kept_offset(const StridedIndexer<1>& kept, int64_t o) {
  int64_t base[1];
  kept.offsets(o, base);
  return base[0];
}

// The fixed tree over one block's partial sums; thread 0 returns the total.
template <typename Acc>
__device__ Acc block_tree_sum(Acc* partial, Acc value) {
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  const Acc total = partial[0];
  __syncthreads();  // partial[] may be reused by the caller's next round
  return total;
}

template <typename T, typename Acc>
__global__ void sum_serial_kernel(T* out, const T* in, StridedIndexer<1> kept, StridedIndexer<1> reduced,
                                  int64_t outputs, int64_t reduce_count) {
  MINIDET_KERNEL_LOOP(o, outputs) {
    const int64_t base = kept_offset(kept, o);
    Acc acc = 0;
    for (int64_t r = 0; r < reduce_count; ++r) acc += static_cast<Acc>(in[base + reduced_offset(reduced, r)]);
    out[o] = static_cast<T>(acc);
  }
}

// Block (blockIdx.x = slice, blockIdx.y = output) sums reduced elements [slice * span, (slice + 1) * span).
template <typename T, typename Acc>
__global__ void sum_slices_kernel(Acc* partials, const T* in, StridedIndexer<1> kept, StridedIndexer<1> reduced,
                                  int64_t reduce_count, int64_t span) {
  __shared__ Acc partial[kReduceThreads];
  const int64_t o = blockIdx.y, slice = blockIdx.x;
  const int64_t base = kept_offset(kept, o);
  const int64_t end = (slice + 1) * span < reduce_count ? (slice + 1) * span : reduce_count;
  Acc acc = 0;
  for (int64_t r = slice * span + threadIdx.x; r < end; r += blockDim.x)
    acc += static_cast<Acc>(in[base + reduced_offset(reduced, r)]);
  const Acc total = block_tree_sum(partial, acc);
  if (threadIdx.x == 0) partials[o * gridDim.x + slice] = total;
}

template <typename T, typename Acc>
__global__ void sum_partials_kernel(T* out, const Acc* partials, int64_t slices) {
  __shared__ Acc partial[kReduceThreads];
  const int64_t o = blockIdx.x;
  Acc acc = 0;
  for (int64_t s = threadIdx.x; s < slices; s += blockDim.x) acc += partials[o * slices + s];
  const Acc total = block_tree_sum(partial, acc);
  if (threadIdx.x == 0) out[o] = static_cast<T>(total);
}

template <typename T, typename Acc>
__global__ void sum_block_kernel(T* out, const T* in, StridedIndexer<1> kept, StridedIndexer<1> reduced,
                                 int64_t outputs, int64_t reduce_count) {
  __shared__ Acc partial[kReduceThreads];
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const int64_t base = kept_offset(kept, o);
    Acc acc = 0;
    for (int64_t r = threadIdx.x; r < reduce_count; r += blockDim.x)
      acc += static_cast<Acc>(in[base + reduced_offset(reduced, r)]);
    const Acc total = block_tree_sum(partial, acc);
    if (threadIdx.x == 0) out[o] = static_cast<T>(total);
  }
}

}  // namespace

void sum_reduce_cuda(const Tensor& out, const Tensor& in, const ReducePlan& plan) {
  cuda::DeviceGuard guard(in.device());
  const Shape* kept_strides[1] = {&plan.kept_strides};
  const Shape* reduced_strides[1] = {&plan.reduced_strides};
  const StridedIndexer<1> kept = make_indexer<1>(plan.kept_sizes, kept_strides);
  const StridedIndexer<1> reduced = make_indexer<1>(plan.reduced_sizes, reduced_strides);
  const int64_t outputs = plan.outputs, count = plan.reduced;
  const cudaStream_t stream = cuda::current_stream();
  MINIDET_DISPATCH_NUMERIC(in.dtype(), "sum", [&] {
    // Floats accumulate in double, as on the CPU, so both devices agree to float32 rounding.
    using acc_t = std::conditional_t<std::is_floating_point_v<scalar_t>, double, scalar_t>;
    const scalar_t* src = in.data<scalar_t>();
    scalar_t* dst = out.data<scalar_t>();
    if (count <= kSerialReduceMax) {
      sum_serial_kernel<scalar_t, acc_t>
          <<<cuda::blocks_for(outputs), cuda::kThreadsPerBlock, 0, stream>>>(dst, src, kept, reduced, outputs, count);
      MINIDET_CUDA_LAUNCH_CHECK("sum_serial_kernel");
      return;
    }
    const int64_t slices = std::min<int64_t>((count + kSliceElements - 1) / kSliceElements, kMaxSlices);
    if (outputs < kSplitBelowOutputs && slices > 1) {
      const int64_t span = (count + slices - 1) / slices;
      const Tensor partials = empty({outputs * slices}, TensorOptions(DTypeOf<acc_t>::value, in.device()));
      sum_slices_kernel<scalar_t, acc_t><<<dim3(static_cast<unsigned>(slices), static_cast<unsigned>(outputs)),
                                           kReduceThreads, 0, stream>>>(partials.data<acc_t>(), src, kept, reduced,
                                                                        count, span);
      MINIDET_CUDA_LAUNCH_CHECK("sum_slices_kernel");
      sum_partials_kernel<scalar_t, acc_t><<<static_cast<unsigned>(outputs), kReduceThreads, 0, stream>>>(
          dst, partials.data<acc_t>(), slices);
      MINIDET_CUDA_LAUNCH_CHECK("sum_partials_kernel");
      return;
    }
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(outputs, cuda::kMaxBlocks));
    sum_block_kernel<scalar_t, acc_t>
        <<<blocks, kReduceThreads, 0, stream>>>(dst, src, kept, reduced, outputs, count);
    MINIDET_CUDA_LAUNCH_CHECK("sum_block_kernel");
  });
}

}  // namespace minidet::detail
