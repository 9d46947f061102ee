#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/strided_indexer.h"
#include "ops/elementwise/elementwise_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void unary_kernel_cuda(int64_t n, StridedIndexer<2> ix, UnaryOp op, T* out, const T* in, double a,
                                  double b) {
  MINIDET_KERNEL_LOOP(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    out[off[0]] = apply_unary<T>(op, in[off[1]], a, b);
  }
}

template <typename T>
__global__ void binary_kernel_cuda(int64_t n, StridedIndexer<3> ix, BinaryOp op, T* out, const T* x, const T* y) {
  MINIDET_KERNEL_LOOP(i, n) {
    int64_t off[3];
    ix.offsets(i, off);
    out[off[0]] = apply_binary<T>(op, x[off[1]], y[off[2]]);
  }
}

template <typename T>
__global__ void compare_kernel_cuda(int64_t n, StridedIndexer<3> ix, CompareOp op, bool* out, const T* x,
                                    const T* y) {
  MINIDET_KERNEL_LOOP(i, n) {
    int64_t off[3];
    ix.offsets(i, off);
    out[off[0]] = apply_compare<T>(op, x[off[1]], y[off[2]]);
  }
}

StridedIndexer<3> indexer3(const Tensor& out, const Tensor& x, const Tensor& y) {
  const Shape* strides[3] = {&out.strides(), &x.strides(), &y.strides()};
  return make_indexer<3>(out.sizes(), strides);
}

}  // namespace

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in, double a, double b) {
  cuda::DeviceGuard guard(out.device());
  const Shape* strides[2] = {&out.strides(), &in.strides()};
  const StridedIndexer<2> ix = make_indexer<2>(out.sizes(), strides);
  const int64_t n = out.numel();
  MINIDET_DISPATCH_FLOATING(out.dtype(), "elementwise", [&] {
    unary_kernel_cuda<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, ix, op, out.data<scalar_t>(), in.data<scalar_t>(), a, b);
    MINIDET_CUDA_LAUNCH_CHECK("unary_kernel_cuda");
  });
}

void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& x, const Tensor& y) {
  cuda::DeviceGuard guard(out.device());
  const StridedIndexer<3> ix = indexer3(out, x, y);
  const int64_t n = out.numel();
  MINIDET_DISPATCH_NUMERIC(out.dtype(), "elementwise", [&] {
    binary_kernel_cuda<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, ix, op, out.data<scalar_t>(), x.data<scalar_t>(), y.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("binary_kernel_cuda");
  });
}

void compare_cuda(CompareOp op, const Tensor& out, const Tensor& x, const Tensor& y) {
  cuda::DeviceGuard guard(out.device());
  const StridedIndexer<3> ix = indexer3(out, x, y);
  const int64_t n = out.numel();
  MINIDET_DISPATCH_ALL(x.dtype(), "compare", [&] {
    compare_kernel_cuda<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, ix, op, out.data<bool>(), x.data<scalar_t>(), y.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("compare_kernel_cuda");
  });
}

}  // namespace minidet::ops::detail
