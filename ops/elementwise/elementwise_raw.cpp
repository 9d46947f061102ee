#include "ops/elementwise/elementwise_raw.h"

#include <cmath>

#include "core/broadcast.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/elementwise/elementwise_kernels.h"
#include "ops/elementwise/shared_scalar.h"

namespace minidet::ops::detail {

// The device switch for all three families.
void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in, double a, double b) {
  if (out.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(out, unary_cpu(op, out, in, a, b), unary_cuda(op, out, in, a, b));
}

void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& x, const Tensor& y) {
  if (out.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(out, binary_cpu(op, out, x, y), binary_cuda(op, out, x, y));
}

void compare_kernel(CompareOp op, const Tensor& out, const Tensor& x, const Tensor& y) {
  if (out.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(out, compare_cpu(op, out, x, y), compare_cuda(op, out, x, y));
}

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

bool scalar_fits(double value, DType dtype) {
  switch (dtype) {
    case DType::Float32:
    case DType::Float64: return true;
    // 2^63 is exactly representable as a double; the int64 range is [-2^63, 2^63). NaN fails every test.
    case DType::Int64:
      return value == std::trunc(value) && value >= -9223372036854775808.0 && value < 9223372036854775808.0;
    case DType::UInt8: return value == std::trunc(value) && value >= 0.0 && value <= 255.0;
    case DType::Bool: return value == 0.0 || value == 1.0;
  }
  return false;
}

Tensor scalar_like(const Tensor& t, double value) { return shared_scalar(value, t.options()); }

}  // namespace minidet::ops::detail
