#include "core/for_each_run.h"
#include "core/strided_indexer.h"
#include "ops/common/parallel.h"
#include "ops/elementwise/elementwise_kernels.h"

namespace minidet::ops::detail {
namespace {

// Each loop is compiled once per op (f is a lambda over a compile-time op code, visit_*_op in
// elementwise_functors.h), so its body holds the op's formula and no switch. A run whose operands all have
// step 1 takes a plain indexed walk that the compiler can vectorise: the same formula per element, so the
// same values as the strided walk.
template <typename T, typename F>
void unary_loop(T* out, const T* in, const StridedIndexer<2>& ix, int64_t n, F f) {
  for_each_run(ix, n, kParallelAbove, [&](const int64_t* first, const int64_t* step, int64_t length) {
    T* o = out + first[0];
    const T* x = in + first[1];
    if (step[0] == 1 && step[1] == 1) {
      for (int64_t j = 0; j < length; ++j) o[j] = f(x[j]);
    } else {
      for (int64_t j = 0; j < length; ++j) o[j * step[0]] = f(x[j * step[1]]);
    }
  });
}

template <typename T, typename Out, typename F>
void binary_loop(Out* out, const T* x, const T* y, const StridedIndexer<3>& ix, int64_t n, F f) {
  for_each_run(ix, n, kParallelAbove, [&](const int64_t* first, const int64_t* step, int64_t length) {
    Out* o = out + first[0];
    const T* p = x + first[1];
    const T* q = y + first[2];
    if (step[0] == 1 && step[1] == 1 && step[2] == 1) {
      for (int64_t j = 0; j < length; ++j) o[j] = f(p[j], q[j]);
    } else {
      for (int64_t j = 0; j < length; ++j) o[j * step[0]] = f(p[j * step[1]], q[j * step[2]]);
    }
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
    visit_unary_op(op, [&](auto kind) {
      constexpr UnaryOp kOp = decltype(kind)::value;
      unary_loop<scalar_t>(out.data<scalar_t>(), in.data<scalar_t>(), ix, out.numel(),
                           [a, b](scalar_t x) { return unary_formula<kOp>(x, a, b); });
    });
  });
}

void binary_cpu(BinaryOp op, const Tensor& out, const Tensor& x, const Tensor& y) {
  const StridedIndexer<3> ix = indexer3(out, x, y);
  MINIDET_DISPATCH_NUMERIC(out.dtype(), "elementwise", [&] {
    visit_binary_op(op, [&](auto kind) {
      constexpr BinaryOp kOp = decltype(kind)::value;
      binary_loop<scalar_t, scalar_t>(out.data<scalar_t>(), x.data<scalar_t>(), y.data<scalar_t>(), ix, out.numel(),
                                      [](scalar_t p, scalar_t q) { return binary_formula<kOp>(p, q); });
    });
  });
}

void compare_cpu(CompareOp op, const Tensor& out, const Tensor& x, const Tensor& y) {
  const StridedIndexer<3> ix = indexer3(out, x, y);
  MINIDET_DISPATCH_ALL(x.dtype(), "compare", [&] {
    visit_compare_op(op, [&](auto kind) {
      constexpr CompareOp kOp = decltype(kind)::value;
      binary_loop<scalar_t, bool>(out.data<bool>(), x.data<scalar_t>(), y.data<scalar_t>(), ix, out.numel(),
                                  [](scalar_t p, scalar_t q) { return compare_formula<kOp>(p, q); });
    });
  });
}

}  // namespace minidet::ops::detail
