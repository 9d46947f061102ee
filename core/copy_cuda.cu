#include <algorithm>
#include <cstdint>

#include "core/copy_kernels.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/strided_indexer.h"

namespace minidet::detail {
namespace {

template <typename Dst, typename Src>
__global__ void copy_kernel(int64_t n, StridedIndexer<2> ix, Dst* out, const Src* in) {
  MINIDET_KERNEL_LOOP(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    out[off[0]] = static_cast<Dst>(in[off[1]]);
  }
}

template <typename T>
__global__ void fill_kernel(int64_t n, StridedIndexer<1> ix, T* out, T value) {
  MINIDET_KERNEL_LOOP(i, n) {
    int64_t off[1];
    ix.offsets(i, off);
    out[off[0]] = value;
  }
}

// A contiguous fill in 16-byte stores: the elements before the first 16-byte boundary and after the last one
// singly, the rest as vectors of 16 / sizeof(T) copies of the value. Up to four times fewer store
// instructions than one element a thread, so the fill runs at the memory's pace (zeroing a gradient buffer
// is a whole pass over it).
template <typename T>
__global__ void fill_contiguous_kernel(int64_t n, T* out, T value) {
  constexpr int kPerVector = 16 / sizeof(T);
  struct alignas(16) Vector {
    T v[kPerVector];
  };
  const int64_t misalignment = int64_t(reinterpret_cast<uintptr_t>(out) % 16) / int64_t(sizeof(T));
  const int64_t head = misalignment == 0 ? 0 : std::min<int64_t>(n, kPerVector - misalignment);
  const int64_t vectors = (n - head) / kPerVector, tail = head + vectors * kPerVector;
  Vector pack;
#pragma unroll
  for (int j = 0; j < kPerVector; ++j) pack.v[j] = value;
  Vector* body = reinterpret_cast<Vector*>(out + head);
  MINIDET_KERNEL_LOOP(i, vectors) { body[i] = pack; }
  MINIDET_KERNEL_LOOP(i, head + (n - tail)) { out[i < head ? i : tail + (i - head)] = value; }
}

}  // namespace

void copy_strided_cuda(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(dst.device());
  // Dense copies are one cudaMemcpyAsync, except while a CUDA graph is being captured: there the copy kernel
  // below is recorded instead, so that a graph holds kernels only. (compute-sanitizer's initcheck checks a
  // graph's memcpy sources when the graph is launched, before the kernels that write them in the same
  // launch have run, and reports a false uninitialized read; kernel reads are checked when they happen.)
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && !cuda::stream_overridden()) {
    MINIDET_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), n * element_size(dst.dtype()),
                                       cudaMemcpyDeviceToDevice, cuda::current_stream()));
    return;
  }
  const Shape* strides[2] = {&dst.strides(), &src.strides()};
  const StridedIndexer<2> ix = make_indexer<2>(dst.sizes(), strides);
  MINIDET_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
    using dst_t = scalar_t;
    MINIDET_DISPATCH_ALL(src.dtype(), "copy_", [&] {
      copy_kernel<dst_t, scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          n, ix, dst.data<dst_t>(), src.data<scalar_t>());
      MINIDET_CUDA_LAUNCH_CHECK("copy_kernel");
    });
  });
}

void fill_cuda(const Tensor& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(dst.device());
  if (dst.is_contiguous()) {
    MINIDET_DISPATCH_ALL(dst.dtype(), "fill_", [&] {
      static_assert(16 % sizeof(scalar_t) == 0, "fill_contiguous_kernel packs whole elements into 16 bytes");
      const int64_t vectors = n * int64_t(sizeof(scalar_t)) / 16 + 1;
      fill_contiguous_kernel<scalar_t>
          <<<cuda::blocks_for(vectors), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
              n, dst.data<scalar_t>(), static_cast<scalar_t>(value));
      MINIDET_CUDA_LAUNCH_CHECK("fill_contiguous_kernel");
    });
    return;
  }
  const Shape* strides[1] = {&dst.strides()};
  const StridedIndexer<1> ix = make_indexer<1>(dst.sizes(), strides);
  MINIDET_DISPATCH_ALL(dst.dtype(), "fill_", [&] {
    fill_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, ix, dst.data<scalar_t>(), static_cast<scalar_t>(value));
    MINIDET_CUDA_LAUNCH_CHECK("fill_kernel");
  });
}

}  // namespace minidet::detail
