#include "ops/elementwise/elementwise_raw.h"

#include "core/broadcast.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/elementwise/elementwise_kernels.h"

namespace minidet::ops::detail {

Tensor unary_raw(const char* name, UnaryOp op, const Tensor& x, double a, double b) {
  check_defined(name, x, "input");
  check_floating(name, x, "input");
  Tensor out = empty(x.sizes(), x.options());
  unary_kernel(op, out, x, a, b);
  return out;
}

namespace {
// Checks the operands and returns them expanded to their common shape (views, no copy).
std::pair<Tensor, Tensor> broadcast_pair(const char* name, const Tensor& a, const Tensor& b) {
  check_defined(name, a, "a");
  check_defined(name, b, "b");
  check_same_device(name, a, "a", b, "b");
  check_same_dtype(name, a, "a", b, "b");
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  NoGradGuard raw;
  return {a.expand(shape), b.expand(shape)};
}
}  // namespace

Tensor binary_raw(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_pair(name, a, b);
  Tensor out = empty(x.sizes(), a.options());
  binary_kernel(op, out, x, y);
  return out;
}

Tensor compare_raw(const char* name, CompareOp op, const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_pair(name, a, b);
  Tensor out = empty(x.sizes(), TensorOptions(kBool, a.device()));
  compare_kernel(op, out, x, y);
  return out;
}

}  // namespace minidet::ops::detail
