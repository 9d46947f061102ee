#include "ops/elementwise/compare.h"

#include "core/factories.h"
#include "ops/elementwise/elementwise_raw.h"

namespace minidet {

using ops::CompareOp;
using ops::detail::compare_raw;

namespace {
Tensor scalar_like(const Tensor& t, double value) { return full({}, value, t.options()); }
}  // namespace

Tensor gt(const Tensor& a, const Tensor& b) { return compare_raw("gt", CompareOp::Gt, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_raw("lt", CompareOp::Lt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_raw("ge", CompareOp::Ge, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_raw("le", CompareOp::Le, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return compare_raw("eq", CompareOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_raw("ne", CompareOp::Ne, a, b); }
Tensor gt(const Tensor& a, double b) { return gt(a, scalar_like(a, b)); }
Tensor lt(const Tensor& a, double b) { return lt(a, scalar_like(a, b)); }
Tensor ge(const Tensor& a, double b) { return ge(a, scalar_like(a, b)); }
Tensor le(const Tensor& a, double b) { return le(a, scalar_like(a, b)); }
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_like(a, b)); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_like(a, b)); }

}  // namespace minidet
