#include <algorithm>
#include <cstdint>

#include "core/copy_kernels.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/strided_indexer.h"

namespace minidet::detail {
namespace {

// Index I: int32_t when every index and offset fits (cuda::with_index), else int64_t.
template <typename Dst, typename Src, typename I>
__global__ void copy_kernel(I n, StridedIndexer<2> ix, Dst* out, const Src* in) {
  MINIDET_KERNEL_LOOP_AS(I, i, n) {
    I off[2];
    ix.offsets(i, off);
    out[off[0]] = static_cast<Dst>(in[off[1]]);
  }
}

// A same-dtype copy whose innermost dim is contiguous in dst and contiguous (or broadcast, kBroadcast) in
// src, in 16-byte vectors: thread i copies vector i % per_row of row i / per_row, where `rows` indexes the
// outer dims. One offset computation serves 16 / sizeof(T) elements, and the loads and stores are 16 bytes
// wide: a transpose of whole planes, such as (B, C, HW) -> (C, B, HW), or a bias broadcast along rows,
// runs at the memory's pace instead of spending its time in index divisions.
template <typename T, typename I, bool kBroadcast>
__global__ void copy_rows_kernel(I vectors, I per_row, StridedIndexer<2> rows, T* out, const T* in) {
  constexpr int kPerVector = 16 / sizeof(T);
  struct alignas(16) Vector {
    T v[kPerVector];
  };
  MINIDET_KERNEL_LOOP_AS(I, i, vectors) {
    const I row = i / per_row, first = (i - row * per_row) * kPerVector;
    I off[2];
    rows.offsets(row, off);
    Vector pack;
    if constexpr (kBroadcast) {
      const T value = in[off[1]];
#pragma unroll
      for (int j = 0; j < kPerVector; ++j) pack.v[j] = value;
    } else {
      pack = *reinterpret_cast<const Vector*>(in + off[1] + first);
    }
    *reinterpret_cast<Vector*>(out + off[0] + first) = pack;
  }
}

// The rows form of a same-dtype copy (copy_rows_kernel), when its conditions hold; false otherwise.
bool copy_rows(const Tensor& dst, const Tensor& src, const StridedIndexer<2>& ix) {
  if (dst.dtype() != src.dtype() || ix.ndim == 0) return false;
  const int64_t bytes = int64_t(element_size(dst.dtype())), per_vector = 16 / bytes;
  const int inner = ix.ndim - 1;
  const int64_t src_step = ix.strides[1][inner];
  if (16 % bytes != 0 || ix.strides[0][inner] != 1 || (src_step != 1 && src_step != 0)) return false;
  if (ix.sizes[inner] % per_vector != 0) return false;
  // Every row must start on a 16-byte boundary in dst, and in src unless src is broadcast along the row.
  if (reinterpret_cast<uintptr_t>(dst.raw_data()) % 16 != 0) return false;
  if (src_step == 1 && reinterpret_cast<uintptr_t>(src.raw_data()) % 16 != 0) return false;
  for (int d = 0; d < inner; ++d)
    if (ix.strides[0][d] % per_vector != 0 || (src_step == 1 && ix.strides[1][d] % per_vector != 0)) return false;
  StridedIndexer<2> rows = ix;
  rows.ndim = inner;
  const int64_t per_row = ix.sizes[inner] / per_vector, vectors = dst.numel() / per_vector;
  const int64_t largest = std::max({vectors, ix.largest_offset(0) + per_vector, ix.largest_offset(1) + per_vector});
  MINIDET_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
    using T = scalar_t;
    cuda::with_index(largest, [&](auto index) {
      using I = decltype(index);
      const auto kernel = src_step == 0 ? copy_rows_kernel<T, I, true> : copy_rows_kernel<T, I, false>;
      kernel<<<cuda::blocks_for(vectors), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          I(vectors), I(per_row), rows, dst.data<T>(), src.data<T>());
    });
    MINIDET_CUDA_LAUNCH_CHECK("copy_rows_kernel");
  });
  return true;
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
  if (copy_rows(dst, src, ix)) return;
  const int64_t largest = std::max({n, ix.largest_offset(0), ix.largest_offset(1)});
  MINIDET_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
    using dst_t = scalar_t;
    MINIDET_DISPATCH_ALL(src.dtype(), "copy_", [&] {
      cuda::with_index(largest, [&](auto index) {
        using I = decltype(index);
        copy_kernel<dst_t, scalar_t, I><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
            I(n), ix, dst.data<dst_t>(), src.data<scalar_t>());
      });
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
