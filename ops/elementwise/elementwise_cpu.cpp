#include "core/for_each_run.h"
#include "core/strided_indexer.h"
#include "ops/elementwise/elementwise_kernels.h"

namespace minidet::ops::detail {
namespace {

constexpr int64_t kParallelAbove = 32768;

template <typename T>
void unary_loop(UnaryOp op, T* out, const T* in, const StridedIndexer<2>& ix, int64_t n, double a, double b) {
  for_each_run(ix, n, kParallelAbove, [&](const int64_t* first, const int64_t* step, int64_t length) {
    for (int64_t j = 0; j < length; ++j) out[first[0] + j * step[0]] = apply_unary<T>(op, in[first[1] + j * step[1]], a, b);
  });
}

template <typename T, typename Out, typename F>
void binary_loop(Out* out, const T* x, const T* y, const StridedIndexer<3>& ix, int64_t n, F f) {
  for_each_run(ix, n, kParallelAbove, [&](const int64_t* first, const int64_t* step, int64_t length) {
    for (int64_t j = 0; j < length; ++j)
      out[first[0] + j * step[0]] = f(x[first[1] + j * step[1]], y[first[2] + j * step[2]]);
  });
}

StridedIndexer<3> indexer3(const Tensor& out, const Tensor& x, const Tensor& y) {
  const Shape* strides[3] = {&out.strides(), &x.strides(), &y.strides()};
  return make_indexer<3>(out.sizes(), strides);
}

}  // namespace

void unary_cpu(UnaryOp op, const Tensor& out, const Tensor& in, double a, double b) {
  const Shape* strides[2] = {&out.strides(), &in.strides()};
  const StridedIndexer<2> ix = make_indexer<2>(out.sizes(), strides);
  MINIDET_DISPATCH_FLOATING(out.dtype(), "elementwise", [&] {
    unary_loop<scalar_t>(op, out.data<scalar_t>(), in.data<scalar_t>(), ix, out.numel(), a, b);
  });
}

void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& x, const Tensor& y) {
  const StridedIndexer<3> ix = indexer3(out, x, y);
  MINIDET_DISPATCH_NUMERIC(out.dtype(), "elementwise", [&] {
    binary_loop<scalar_t, scalar_t>(out.data<scalar_t>(), x.data<scalar_t>(), y.data<scalar_t>(), ix, out.numel(),
                                    [op](scalar_t p, scalar_t q) { return apply_binary(op, p, q); });
  });
}

void compare_cpu(CompareOp op, const Tensor& out, const Tensor& x, const Tensor& y) {
  const StridedIndexer<3> ix = indexer3(out, x, y);
  MINIDET_DISPATCH_ALL(x.dtype(), "compare", [&] {
    binary_loop<scalar_t, bool>(out.data<bool>(), x.data<scalar_t>(), y.data<scalar_t>(), ix, out.numel(),
                                [op](scalar_t p, scalar_t q) { return apply_compare(op, p, q); });
  });
}

}  // namespace minidet::ops::detail
