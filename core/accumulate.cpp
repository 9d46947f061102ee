#include "core/accumulate.h"

#include "core/reduce_sum.h"
#include "core/for_each_run.h"
#include "core/strided_indexer.h"

namespace minidet {
namespace detail {
namespace {
template <typename T>
void add_loop(T* out, const T* in, const StridedIndexer<2>& ix, int64_t n) {
  for_each_run(ix, n, 32768, [&](const int64_t* first, const int64_t* step, int64_t length) {
    for (int64_t j = 0; j < length; ++j) out[first[0] + j * step[0]] += in[first[1] + j * step[1]];
  });
}
}  // namespace

void add_into_cpu(const Tensor& dst, const Tensor& src) {
  const Shape* strides[2] = {&dst.strides(), &src.strides()};
  const StridedIndexer<2> ix = make_indexer<2>(dst.sizes(), strides);
  MINIDET_DISPATCH_FLOATING(dst.dtype(), "add_into", [&] {
    add_loop<scalar_t>(dst.data<scalar_t>(), src.data<scalar_t>(), ix, dst.numel());
  });
}
}  // namespace detail

void add_into(const Tensor& dst, const Tensor& src) {
  MINIDET_CHECK(dst.dtype() == src.dtype() && dst.device() == src.device(), "add_into: dst is ", dst.dtype(),
                " on ", dst.device(), " but src is ", src.dtype(), " on ", src.device());
  MINIDET_CHECK(broadcastable_to(src.sizes(), dst.sizes()), "add_into: src shape ", src.sizes(),
                " does not broadcast to dst shape ", dst.sizes());
  if (dst.numel() == 0) return;
  dst.bump_version();  // before the write: a read-only tensor (core/storage.h) throws unchanged
  Tensor source;
  {
    NoGradGuard raw;
    source = src.expand(dst.sizes());
  }
  if (dst.is_cuda()) {
#if MINIDET_WITH_CUDA
    detail::add_into_cuda(dst, source);
#endif
  } else {
    detail::add_into_cpu(dst, source);
  }
}

}  // namespace minidet
