#include "ops/matmul/gemm.h"

#include "ops/common/checks.h"
#include "ops/common/device_switch.h"

namespace minidet::ops {
namespace detail {

MatrixOperand describe_operand(const Tensor& t, int64_t batch_dims, int64_t* batch_stride) {
  const int64_t rows = t.size(batch_dims), cols = t.size(batch_dims + 1);
  const int64_t row_stride = t.stride(batch_dims), col_stride = t.stride(batch_dims + 1);
  *batch_stride = batch_dims > 0 ? t.stride(0) : 0;
  // BLAS needs ld >= the contiguous extent, even for a dim of size 1.
  if (col_stride == 1 && row_stride >= std::max<int64_t>(cols, 1)) return {t.raw_data(), row_stride, false, {}};
  if (row_stride == 1 && col_stride >= std::max<int64_t>(rows, 1)) return {t.raw_data(), col_stride, true, {}};
  NoGradGuard raw;
  Tensor dense = t.contiguous();
  *batch_stride = batch_dims > 0 ? dense.stride(0) : 0;
  return {dense.raw_data(), std::max<int64_t>(cols, 1), false, dense};
}

}  // namespace detail

namespace {

void run(const char* name, const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta,
         int64_t batch_dims) {
  check_same_device(name, a, "a", b, "b");
  check_same_device(name, a, "a", c, "c");
  check_same_dtype(name, a, "a", b, "b");
  check_same_dtype(name, a, "a", c, "c");
  check_floating(name, a, "a");
  const int64_t batch = batch_dims ? a.size(0) : 1;
  const int64_t m = a.size(batch_dims), k = a.size(batch_dims + 1), n = b.size(batch_dims + 1);
  MINIDET_CHECK(b.size(batch_dims) == k && c.size(batch_dims) == m && c.size(batch_dims + 1) == n &&
                    (!batch_dims || (b.size(0) == batch && c.size(0) == batch)),
                name, ": shapes ", a.sizes(), " @ ", b.sizes(), " -> ", c.sizes(), " do not match");
  MINIDET_CHECK(c.stride(batch_dims + 1) == 1 || n <= 1, name, ": the output must have unit column stride");
  MINIDET_CHECK(!batch_dims || c.is_contiguous(), name, ": the batched output must be contiguous");
  if (c.numel() == 0) return;
  c.bump_version();  // before the write: a read-only tensor (core/storage.h) throws unchanged
  int64_t a_batch_stride = 0, b_batch_stride = 0;
  const detail::MatrixOperand op_a = detail::describe_operand(a, batch_dims, &a_batch_stride);
  const detail::MatrixOperand op_b = detail::describe_operand(b, batch_dims, &b_batch_stride);
  MINIDET_DEVICE_SWITCH(c, detail::gemm_cpu(batch, m, n, k, op_a, a_batch_stride, op_b, b_batch_stride, c, alpha, beta),
                        detail::gemm_cuda(batch, m, n, k, op_a, a_batch_stride, op_b, b_batch_stride, c, alpha, beta));
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  MINIDET_CHECK(a.dim() == 2 && b.dim() == 2 && c.dim() == 2, "gemm: expected 2-D operands, got ", a.sizes(),
                ", ", b.sizes(), ", ", c.sizes());
  run("gemm", a, b, c, alpha, beta, 0);
}

void gemm_batched(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  MINIDET_CHECK(a.dim() == 3 && b.dim() == 3 && c.dim() == 3, "gemm_batched: expected 3-D operands, got ",
                a.sizes(), ", ", b.sizes(), ", ", c.sizes());
  run("gemm_batched", a, b, c, alpha, beta, 1);
}

void gemm_batched(const Tensor& a, const SourceOperand& b, const Tensor& c, double alpha, double beta) {
  const char* name = "gemm_batched";
  check_same_device(name, a, "a", c, "c");
  check_same_dtype(name, a, "a", c, "c");
  check_floating(name, a, "a");
  MINIDET_CHECK(!a.is_cuda(), name, ": a B that is never stored (a RowSource) is read on the CPU only");
  MINIDET_CHECK(a.dim() == 3 && c.dim() == 3 && c.size(0) == a.size(0) && c.size(1) == a.size(1), name, ": shapes ",
                a.sizes(), " @ source -> ", c.sizes(), " do not match");
  MINIDET_CHECK(c.is_contiguous(), name, ": the batched output must be contiguous");
  if (c.numel() == 0) return;
  c.bump_version();
  int64_t a_batch_stride = 0;
  const detail::MatrixOperand op_a = detail::describe_operand(a, 1, &a_batch_stride);
  detail::MatrixOperand op_b{nullptr, 0, b.transposed, {}, b.source, b.row0, b.col0, b.batch_rows};
  detail::gemm_cpu(a.size(0), a.size(1), c.size(2), a.size(2), op_a, a_batch_stride, op_b, b.batch_cols, c, alpha,
                   beta);
}

}  // namespace minidet::ops
