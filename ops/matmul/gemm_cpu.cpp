// CPU matrix products through Eigen. Eigen maps our row-major buffers in place (no copies) and runs its
// blocked, vectorised, OpenMP-parallel GEMM.
#include <Eigen/Core>

#include "ops/matmul/gemm.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ConstMap = Eigen::Map<const RowMajor<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using MutMap = Eigen::Map<RowMajor<T>, 0, Eigen::OuterStride<>>;

// A stored row-major (rows x cols) block; transposed operands are stored as (cols x rows).
template <typename T>
ConstMap<T> stored(const MatrixOperand& op, int64_t offset, int64_t rows, int64_t cols) {
  const T* data = static_cast<const T*>(op.data) + offset;
  return op.transposed ? ConstMap<T>(data, cols, rows, Eigen::OuterStride<>(op.ld))
                       : ConstMap<T>(data, rows, cols, Eigen::OuterStride<>(op.ld));
}

template <typename T>
void gemm_typed(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixOperand& a, int64_t a_bs,
                const MatrixOperand& b, int64_t b_bs, const Tensor& c, double alpha, double beta) {
  const int64_t ldc = std::max<int64_t>(c.stride(c.dim() - 2), 1);
  const int64_t c_bs = c.dim() == 3 ? c.stride(0) : 0;
  for (int64_t i = 0; i < batch; ++i) {
    MutMap<T> out(c.data<T>() + i * c_bs, m, n, Eigen::OuterStride<>(ldc));
    const ConstMap<T> A = stored<T>(a, i * a_bs, m, k), B = stored<T>(b, i * b_bs, k, n);
    if (beta == 0.0) out.setZero();  // so that NaN garbage in c never leaks through 0 * NaN
    else if (beta != 1.0) out *= static_cast<T>(beta);
    const T s = static_cast<T>(alpha);
    if (!a.transposed && !b.transposed) out.noalias() += s * (A * B);
    else if (a.transposed && !b.transposed) out.noalias() += s * (A.transpose() * B);
    else if (!a.transposed && b.transposed) out.noalias() += s * (A * B.transpose());
    else out.noalias() += s * (A.transpose() * B.transpose());
  }
}

}  // namespace

void gemm_cpu(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixOperand& a, int64_t a_bs,
              const MatrixOperand& b, int64_t b_bs, const Tensor& c, double alpha, double beta) {
  MINIDET_DISPATCH_FLOATING(c.dtype(), "gemm", [&] {
    gemm_typed<scalar_t>(batch, m, n, k, a, a_bs, b, b_bs, c, alpha, beta);
  });
}

}  // namespace minidet::ops::detail
