// mm and bmm record one node each, around the raw gemm; matmul reduces every case to them with views.
#include "ops/matmul/matmul.h"

#include "autograd/function.h"
#include "core/broadcast.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/matmul/gemm.h"
#include "ops/shape/views.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;

namespace {

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  ops::check_defined(op, a, "a");
  ops::check_defined(op, b, "b");
  ops::check_same_device(op, a, "a", b, "b");
  ops::check_same_dtype(op, a, "a", b, "b");
  ops::check_floating(op, a, "a");
}

// A new contiguous a @ b: (m, k) @ (k, n), or batched (batch, m, k) @ (batch, k, n). Not recorded.
Tensor product_raw(const Tensor& a, const Tensor& b) {
  const bool batched = a.dim() == 3;
  Shape out_sizes = a.sizes();
  out_sizes.back() = b.size(-1);
  Tensor out = empty(out_sizes, a.options());
  if (a.size(-1) == 0) return out.zero_();  // an empty sum; leave nothing to BLAS's k = 0 conventions
  NoGradGuard raw;  // gemm may need a contiguous copy of a strided operand
  if (batched) ops::gemm_batched(a, b, out);
  else ops::gemm(a, b, out);
  return out;
}

// The mm/bmm node. Saved: B only when A needs a gradient (dA = G B^T), A only when B does (dB = A^T G).
// `last_two` transposes the matrix dims of a 2-D or 3-D raw tensor as a view.
Tensor record_product(const char* name, const Tensor& a, const Tensor& b, const Tensor& out) {
  const bool a_needs = autograd::any_requires_grad({a}), b_needs = autograd::any_requires_grad({b});
  autograd::record(name, {a, b}, {out}, {a_needs ? b : Tensor(), b_needs ? a : Tensor()},
                   [](BackwardContext& ctx, const TensorList& g) -> TensorList {
                     auto last_two = [](const Tensor& t) { return t.transpose(-2, -1); };
                     Tensor grad_a, grad_b;
                     if (ctx.needs_input_grad(0)) grad_a = product_raw(g[0], last_two(ctx.saved(0)));
                     if (ctx.needs_input_grad(1)) grad_b = product_raw(last_two(ctx.saved(1)), g[0]);
                     return {grad_a, grad_b};
                   });
  return out;
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  check_operands("mm", a, b);
  MINIDET_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D matrices, got shapes ", a.sizes(), " and ",
                b.sizes());
  MINIDET_CHECK(a.size(1) == b.size(0), "mm: shapes ", a.sizes(), " and ", b.sizes(),
                " cannot be multiplied (", a.size(1), " columns vs ", b.size(0), " rows)");
  return record_product("mm", a, b, product_raw(a, b));
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_operands("bmm", a, b);
  MINIDET_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D batches of matrices, got shapes ", a.sizes(),
                " and ", b.sizes());
  MINIDET_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ: ", a.sizes(), " and ", b.sizes());
  MINIDET_CHECK(a.size(2) == b.size(1), "bmm: shapes ", a.sizes(), " and ", b.sizes(),
                " cannot be multiplied (", a.size(2), " columns vs ", b.size(1), " rows)");
  return record_product("bmm", a, b, product_raw(a, b));
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_operands("matmul", a, b);
  MINIDET_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got shapes ",
                a.sizes(), " and ", b.sizes());
  const int64_t k = a.size(-1);
  const int64_t b_rows = b.dim() == 1 ? b.size(0) : b.size(-2);
  MINIDET_CHECK(k == b_rows, "matmul: shapes ", a.sizes(), " and ", b.sizes(), " cannot be multiplied (", k,
                " columns vs ", b_rows, " rows)");
  // A vector becomes a 1-row (a) or 1-column (b) matrix; the added dim is dropped from the result.
  const Tensor a_mat = a.dim() == 1 ? unsqueeze(a, 0) : a;
  const Tensor b_mat = b.dim() == 1 ? unsqueeze(b, 1) : b;
  const int64_t m = a_mat.size(-2), n = b_mat.size(-1);
  Shape a_lead(a.sizes().begin(), a.sizes().end() - 1);  // a's sizes without k: the result's leading dims

  if (b.dim() <= 2) {
    // (..., m, k) @ (k, n): every leading row of a meets the same b, so one mm over all rows does it.
    // reshape is a view when a's rows are evenly spaced (the usual case) and a copy otherwise.
    Tensor rows = a.dim() <= 2 ? a_mat : reshape(a, {shape_numel(a_lead), k});
    Tensor out = mm(rows, b_mat);
    Shape out_sizes = a_lead;
    if (b.dim() == 2) out_sizes.push_back(n);
    return out.sizes() == out_sizes ? out : reshape(out, out_sizes);
  }

  // Batched: broadcast the batch dims, flatten them into one, bmm, and restore them.
  const Shape a_batch(a_mat.sizes().begin(), a_mat.sizes().end() - 2);
  const Shape b_batch(b_mat.sizes().begin(), b_mat.sizes().end() - 2);
  const Shape batch = broadcast_shapes(a_batch, b_batch, "matmul");
  const int64_t batch_count = shape_numel(batch);
  auto batched = [&](const Tensor& t, int64_t rows, int64_t cols) {
    Shape full = batch;
    full.push_back(rows);
    full.push_back(cols);
    const Tensor expanded = t.sizes() == full ? t : expand(t, full);  // stride 0 where t is broadcast
    return expanded.dim() == 3 ? expanded : reshape(expanded, {batch_count, rows, cols});
  };
  Tensor out = bmm(batched(a_mat, m, k), batched(b_mat, k, n));
  Shape out_sizes = batch;
  if (a.dim() > 1) out_sizes.push_back(m);
  if (b.dim() > 1) out_sizes.push_back(n);
  return out.sizes() == out_sizes ? out : reshape(out, out_sizes);
}

}  // namespace minidet
