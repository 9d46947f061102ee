// cat copies each input into its slice of the output: on the CPU with Tensor::copy_, on a GPU in one launch
// for all contiguous pieces (cat_kernels.h says why); backward hands each input the matching slice of the
// gradient (a view, no copy). stack is cat of unsqueezed views.
#include "ops/shape/cat.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/shape/cat_kernels.h"
#include "ops/shape/views.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;

namespace {

// Same dtype and device as the first tensor, with a composed message that says which position differs.
void check_like_first(const char* op, const std::vector<Tensor>& tensors) {
  MINIDET_CHECK(!tensors.empty(), op, ": expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i)
    MINIDET_CHECK(tensors[i].defined(), op, ": tensor ", i, " is an undefined tensor");
  const Tensor& first = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) {
    MINIDET_CHECK(tensors[i].dtype() == first.dtype(), op, ": expected every tensor to have dtype ",
                  first.dtype(), " (like tensor 0), got ", tensors[i].dtype(), " at position ", i);
    MINIDET_CHECK(tensors[i].device() == first.device(), op, ": expected every tensor on ", first.device(),
                  " (like tensor 0), got ", tensors[i].device(), " at position ", i);
  }
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  check_like_first("cat", tensors);
  const Tensor& first = tensors[0];
  const int64_t ndim = first.dim();
  MINIDET_CHECK(ndim > 0, "cat: zero-dimensional tensors cannot be concatenated (use stack)");
  dim = wrap_dim(dim, ndim, "cat");

  Shape out_sizes = first.sizes();
  out_sizes[dim] = 0;
  std::vector<int64_t> lengths;  // each input's size along dim: where its slice of the output starts and ends
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    MINIDET_CHECK(t.dim() == ndim, "cat: expected every tensor to have ", ndim, " dims (like tensor 0), got ",
                  "shape ", t.sizes(), " at position ", i);
    for (int64_t d = 0; d < ndim; ++d)
      MINIDET_CHECK(d == dim || t.size(d) == first.size(d), "cat: sizes must match except in dim ", dim,
                    ": tensor 0 has shape ", first.sizes(), " but tensor ", i, " has shape ", t.sizes());
    lengths.push_back(t.size(dim));
    out_sizes[dim] += t.size(dim);
  }

  Tensor out = empty(out_sizes, first.options());
  {
    NoGradGuard raw;
    std::vector<Tensor> pieces;  // the non-empty inputs, and where each starts along dim
    std::vector<int64_t> offsets;
    int64_t offset = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].numel() > 0) {
        pieces.push_back(tensors[i]);
        offsets.push_back(offset);
      }
      offset += lengths[i];
    }
    MINIDET_DEVICE_SWITCH(out, ops::detail::cat_cpu(out, pieces, offsets, dim),
                          ops::detail::cat_cuda(out, pieces, offsets, dim));
  }

  autograd::record("cat", tensors, {out}, {}, [dim, lengths](BackwardContext& ctx, const TensorList& g) -> TensorList {
    TensorList grads(lengths.size());
    int64_t offset = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (ctx.needs_input_grad(i)) grads[i] = g[0].narrow(dim, offset, lengths[i]);
      offset += lengths[i];
    }
    return grads;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  check_like_first("stack", tensors);
  const Tensor& first = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i)
    MINIDET_CHECK(tensors[i].sizes() == first.sizes(), "stack: expected every tensor to have shape ",
                  first.sizes(), " (like tensor 0), got ", tensors[i].sizes(), " at position ", i);
  dim = wrap_dim(dim, first.dim() + 1, "stack");
  std::vector<Tensor> pieces;
  pieces.reserve(tensors.size());
  for (const Tensor& t : tensors) pieces.push_back(unsqueeze(t, dim));
  return cat(pieces, dim);
}

}  // namespace minidet
