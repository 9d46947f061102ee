#include <cstring>

#include "core/copy_kernels.h"
#include "core/strided_indexer.h"

namespace minidet::detail {
namespace {

// Converting through static_cast is exact for the conversions that matter (int64 <-> float for values
// below 2^24/2^53); to bool it yields value != 0, as in PyTorch.
// Row by row along the innermost (coalesced) dim: the index arithmetic runs once per row, not once per
// element, and the inner loop is a plain strided walk (a transpose's rows, a broadcast's repeats).
template <typename Dst, typename Src>
void copy_loop(const Tensor& dst, const Tensor& src) {
  const Shape* strides[2] = {&dst.strides(), &src.strides()};
  const StridedIndexer<2> ix = make_indexer<2>(dst.sizes(), strides);
  Dst* out = dst.data<Dst>();
  const Src* in = src.data<Src>();
  const int64_t n = dst.numel();
  const int64_t inner = ix.ndim ? ix.sizes[ix.ndim - 1] : 1;
  const int64_t out_step = ix.ndim ? ix.strides[0][ix.ndim - 1] : 0, in_step = ix.ndim ? ix.strides[1][ix.ndim - 1] : 0;
#pragma omp parallel for if (n > 32768)
  for (int64_t row = 0; row < n / inner; ++row) {
    int64_t off[2];
    ix.offsets(row * inner, off);
    Dst* o = out + off[0];
    const Src* p = in + off[1];
    for (int64_t j = 0; j < inner; ++j) o[j * out_step] = static_cast<Dst>(p[j * in_step]);
  }
}

template <typename T>
void fill_loop(const Tensor& dst, T value) {
  const Shape* strides[1] = {&dst.strides()};
  const StridedIndexer<1> ix = make_indexer<1>(dst.sizes(), strides);
  T* out = dst.data<T>();
  const int64_t n = dst.numel();
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    int64_t off[1];
    ix.offsets(i, off);
    out[off[0]] = value;
  }
}

}  // namespace

void copy_strided_cpu(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  // Fast path: same dtype, both dense in the same order.
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    std::memcpy(dst.raw_data(), src.raw_data(), dst.numel() * element_size(dst.dtype()));
    return;
  }
  MINIDET_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
    using dst_t = scalar_t;
    MINIDET_DISPATCH_ALL(src.dtype(), "copy_", [&] { copy_loop<dst_t, scalar_t>(dst, src); });
  });
}

void fill_cpu(const Tensor& dst, double value) {
  MINIDET_DISPATCH_ALL(dst.dtype(), "fill_", [&] { fill_loop<scalar_t>(dst, static_cast<scalar_t>(value)); });
}

}  // namespace minidet::detail
