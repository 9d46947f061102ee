#include <cstring>

#include "core/copy_kernels.h"
#include "core/for_each_run.h"
#include "core/strided_indexer.h"

namespace minidet::detail {
namespace {

// Converting through static_cast is exact for the conversions that matter (int64 <-> float for values
// below 2^24/2^53); to bool it yields value != 0, as in PyTorch.
template <typename Dst, typename Src>
void copy_loop(const Tensor& dst, const Tensor& src) {
  const Shape* strides[2] = {&dst.strides(), &src.strides()};
  const StridedIndexer<2> ix = make_indexer<2>(dst.sizes(), strides);
  Dst* out = dst.data<Dst>();
  const Src* in = src.data<Src>();
  for_each_run(ix, dst.numel(), 32768, [&](const int64_t* first, const int64_t* step, int64_t length) {
    Dst* o = out + first[0];
    const Src* p = in + first[1];
    for (int64_t j = 0; j < length; ++j) o[j * step[0]] = static_cast<Dst>(p[j * step[1]]);
  });
}

template <typename T>
void fill_loop(const Tensor& dst, T value) {
  const Shape* strides[1] = {&dst.strides()};
  const StridedIndexer<1> ix = make_indexer<1>(dst.sizes(), strides);
  T* out = dst.data<T>();
  for_each_run(ix, dst.numel(), 32768, [&](const int64_t* first, const int64_t* step, int64_t length) {
    for (int64_t j = 0; j < length; ++j) out[first[0] + j * step[0]] = value;
  });
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
