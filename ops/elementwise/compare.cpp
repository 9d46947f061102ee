#include "ops/elementwise/compare.h"

#include <cmath>
#include <limits>

#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/elementwise/elementwise_raw.h"

namespace minidet {

using ops::CompareOp;
using ops::detail::compare_raw;

namespace {

// a (op) b for a scalar b. When a's dtype holds b exactly, b becomes a 0-dim tensor of that dtype. Otherwise
// (an integer or bool tensor against 0.5, -0.5, 300 for uint8, NaN...) casting b would truncate or wrap it, or
// be undefined behaviour, and lt(x, 0.5) would compare against 0; compare in float64 instead.
Tensor compare_scalar(const char* name, CompareOp op, const Tensor& a, double b) {
  ops::check_defined(name, a, "a");
  if (ops::detail::scalar_fits(b, a.dtype())) return compare_raw(name, op, a, ops::detail::scalar_like(a, b));
  // An integral b that does not fit lies beyond the dtype's range: every value is on one side of it, and so
  // of the infinity on that side. Use the infinity, because int64 values near the limits round on their way to
  // float64 (INT64_MAX becomes 2^63) and would otherwise tie with b = 2^63. A non-integral b has |b| < 2^52,
  // where that rounding cannot change an order.
  const double inf = std::numeric_limits<double>::infinity();
  const double wide_b = b == std::trunc(b) ? (b > 0 ? inf : -inf) : b;  // NaN stays NaN
  NoGradGuard raw;  // .to is a raw method; integer and bool tensors never require grad anyway
  const Tensor wide = a.to(kFloat64);
  return compare_raw(name, op, wide, full({}, wide_b, wide.options()));
}

}  // namespace

Tensor gt(const Tensor& a, const Tensor& b) { return compare_raw("gt", CompareOp::Gt, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_raw("lt", CompareOp::Lt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_raw("ge", CompareOp::Ge, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_raw("le", CompareOp::Le, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return compare_raw("eq", CompareOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_raw("ne", CompareOp::Ne, a, b); }
Tensor gt(const Tensor& a, double b) { return compare_scalar("gt", CompareOp::Gt, a, b); }
Tensor lt(const Tensor& a, double b) { return compare_scalar("lt", CompareOp::Lt, a, b); }
Tensor ge(const Tensor& a, double b) { return compare_scalar("ge", CompareOp::Ge, a, b); }
Tensor le(const Tensor& a, double b) { return compare_scalar("le", CompareOp::Le, a, b); }
Tensor eq(const Tensor& a, double b) { return compare_scalar("eq", CompareOp::Eq, a, b); }
Tensor ne(const Tensor& a, double b) { return compare_scalar("ne", CompareOp::Ne, a, b); }

}  // namespace minidet
