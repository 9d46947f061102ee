// contiguous, clone and to: copy with the raw Tensor methods, then record an identity-like backward.
#include "ops/shape/copies.h"

#include "autograd/function.h"
#include "ops/common/checks.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;

Tensor contiguous(const Tensor& x) {
  ops::check_defined("contiguous", x, "input");
  // Nothing to copy: hand back x itself (recording it again would overwrite its grad_fn).
  if (x.is_contiguous()) return x;
  return clone(x);
}

Tensor clone(const Tensor& x) {
  ops::check_defined("clone", x, "input");
  Tensor y;
  {
    NoGradGuard raw;
    y = x.clone();
  }
  autograd::record("clone", {x}, {y}, {}, [](BackwardContext&, const TensorList& g) -> TensorList {
    return {g[0]};
  });
  return y;
}

Tensor to(const Tensor& x, const TensorOptions& options) {
  ops::check_defined("to", x, "input");
  if (options.dtype == x.dtype() && options.device == x.device()) return x;
  Tensor y;
  {
    NoGradGuard raw;
    y = x.to(options);
  }
  // Integers and bools carry no gradient: the result is simply a constant, like PyTorch's x.long().
  if (!is_floating(options.dtype)) return y;
  const TensorOptions back = x.options();
  autograd::record("to", {x}, {y}, {}, [back](BackwardContext&, const TensorList& g) -> TensorList {
    return {g[0].to(back)};
  });
  return y;
}

Tensor to(const Tensor& x, const Device& device) {
  ops::check_defined("to", x, "input");
  return to(x, TensorOptions(x.dtype(), device));
}

Tensor to(const Tensor& x, DType dtype) {
  ops::check_defined("to", x, "input");
  return to(x, TensorOptions(dtype, x.device()));
}

}  // namespace minidet
