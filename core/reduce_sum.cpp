#include "core/reduce_sum.h"

#include <algorithm>

#include "core/factories.h"
#include "core/strided_indexer.h"

namespace minidet {
namespace detail {
namespace {

template <typename T>
void sum_reduce_loop(T* out, const T* in, const ReducePlan& plan) {
  const Shape* kept[1] = {&plan.kept_strides};
  const Shape* reduced[1] = {&plan.reduced_strides};
  const StridedIndexer<1> kept_ix = make_indexer<1>(plan.kept_sizes, kept);
  const StridedIndexer<1> reduced_ix = make_indexer<1>(plan.reduced_sizes, reduced);
  // Accumulate in double for float32 too: sums of many gradients lose little that way on the CPU.
  using acc_t = std::conditional_t<std::is_floating_point_v<T>, double, T>;
#pragma omp parallel for if (plan.outputs * plan.reduced > 32768)
  for (int64_t o = 0; o < plan.outputs; ++o) {
    int64_t base[1], off[1];
    kept_ix.offsets(o, base);
    acc_t acc = 0;
    for (int64_t r = 0; r < plan.reduced; ++r) {
      reduced_ix.offsets(r, off);
      acc += static_cast<acc_t>(in[base[0] + off[0]]);
    }
    out[o] = static_cast<T>(acc);
  }
}

}  // namespace

void sum_reduce_cpu(const Tensor& out, const Tensor& in, const ReducePlan& plan) {
  MINIDET_DISPATCH_NUMERIC(in.dtype(), "sum", [&] {
    sum_reduce_loop<scalar_t>(out.data<scalar_t>(), in.data<scalar_t>(), plan);
  });
}

}  // namespace detail

namespace {

Tensor run_plan(const Tensor& t, const detail::ReducePlan& plan, const Shape& out_shape) {
  Tensor out = empty(out_shape, t.options());
  if (out.numel() == 0) return out;
  if (plan.reduced == 0) return out.fill_(0.0);  // summing nothing gives zeros
  if (t.is_cuda()) {
#if MINIDET_WITH_CUDA
    detail::sum_reduce_cuda(out, t, plan);
#endif
  } else {
    detail::sum_reduce_cpu(out, t, plan);
  }
  return out;
}

}  // namespace

Tensor sum_dims_raw(const Tensor& input, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor t = input;
  if (!is_floating(t.dtype()) && t.dtype() != kInt64) {
    NoGradGuard raw;  // integer tensors never require grad; the conversion is internal
    t = t.to(kInt64);
  }
  std::vector<bool> reduce(t.dim(), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, t.dim(), "sum");
    MINIDET_CHECK(t.dim() > 0 || d == 0 || d == -1, "sum: dim ", d, " is invalid for a 0-dim tensor");
    if (t.dim() > 0) {
      MINIDET_CHECK(!reduce[w], "sum: dim ", d, " appears twice in ", dims);
      reduce[w] = true;
    }
  }
  detail::ReducePlan plan;
  Shape out_shape;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (reduce[d]) {
      plan.reduced_sizes.push_back(t.size(d));
      plan.reduced_strides.push_back(t.stride(d));
      plan.reduced *= t.size(d);
      if (keepdim) out_shape.push_back(1);
    } else {
      plan.kept_sizes.push_back(t.size(d));
      plan.kept_strides.push_back(t.stride(d));
      plan.outputs *= t.size(d);
      out_shape.push_back(t.size(d));
    }
  }
  return run_plan(t, plan, out_shape);
}

Tensor sum_to(const Tensor& t, const Shape& shape) {
  if (t.sizes() == shape) return t;
  MINIDET_CHECK(broadcastable_to(shape, t.sizes()), "sum_to: shape ", shape, " does not broadcast to ",
                t.sizes());
  detail::ReducePlan plan;
  const int64_t lead = t.dim() - static_cast<int64_t>(shape.size());
  for (int64_t d = 0; d < t.dim(); ++d) {
    const bool summed = d < lead || (shape[d - lead] == 1 && t.size(d) != 1);
    (summed ? plan.reduced_sizes : plan.kept_sizes).push_back(t.size(d));
    (summed ? plan.reduced_strides : plan.kept_strides).push_back(t.stride(d));
    (summed ? plan.reduced : plan.outputs) *= t.size(d);
  }
  return run_plan(t, plan, shape);
}

}  // namespace minidet
