// CUDA matrix products through cuBLAS (column-major; see gemm.h for the operand swap).
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "ops/matmul/gemm.h"

namespace minidet::ops::detail {
namespace {

cublasOperation_t op_of(const MatrixOperand& m) { return m.transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }

int checked_int(int64_t v, const char* what) {
  MINIDET_CHECK(v <= INT32_MAX, "gemm: ", what, " = ", v, " exceeds cuBLAS's 32-bit limit");
  return static_cast<int>(v);
}

}  // namespace

void gemm_cuda(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixOperand& a, int64_t a_bs,
               const MatrixOperand& b, int64_t b_bs, const Tensor& c, double alpha, double beta) {
  cuda::DeviceGuard guard(c.device());
  cublasHandle_t handle = cuda::cublas_handle();
  const int M = checked_int(m, "m"), N = checked_int(n, "n"), K = checked_int(k, "k");
  const int lda = checked_int(a.ld, "lda"), ldb = checked_int(b.ld, "ldb");
  const int ldc = checked_int(std::max<int64_t>(c.stride(c.dim() - 2), 1), "ldc");
  const long long c_bs = c.dim() == 3 ? c.stride(0) : 0;
  // Column-major C^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m): B goes first.
  if (c.dtype() == kFloat32) {
    const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
    MINIDET_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle, op_of(b), op_of(a), N, M, K, &al, static_cast<const float*>(b.data), ldb, b_bs,
        static_cast<const float*>(a.data), lda, a_bs, &be, c.data<float>(), ldc, c_bs, checked_int(batch, "batch")));
  } else {
    MINIDET_CHECK(c.dtype() == kFloat64, "gemm: unsupported dtype ", c.dtype());
    MINIDET_CUBLAS_CHECK(cublasDgemmStridedBatched(
        handle, op_of(b), op_of(a), N, M, K, &alpha, static_cast<const double*>(b.data), ldb, b_bs,
        static_cast<const double*>(a.data), lda, a_bs, &beta, c.data<double>(), ldc, c_bs,
        checked_int(batch, "batch")));
  }
}

}  // namespace minidet::ops::detail
