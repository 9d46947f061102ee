// CPU matrix products, OpenMP-parallel within a product or across a batch of products. float32 runs
// minidet's own packed GEMM (packed_gemm.h), which ran the detector's products faster than Eigen's; float64
// (the gradient checks, the references of tests) runs Eigen's, which maps our row-major buffers in place.
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "ops/matmul/gemm.h"
#include "ops/matmul/packed_gemm.h"

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

// Eigen's kernel (float64 here) takes the rows of its left operand in groups of 3 SIMD vectors (24 doubles
// with AVX-512, 12 with AVX2, 6 with SSE) and sums a smaller remainder with other accumulators, so other bits.
// Panels that start at multiples of 48 cut no group and leave the remainder where the whole product has it.
// The packed float GEMM gives the same bits however C is cut; its panels start at whole register tiles, so that
// no cut makes a partial one.
template <typename T>
int64_t panel_align(bool by_rows) {
  if constexpr (std::is_same_v<T, float>) return by_rows ? packed_gemm_tile_rows() : packed_gemm_tile_cols();
  return 48;
}

// The result rows [r0, r1) and columns [c0, c1) of product i: out = alpha * A B + beta * out.
template <typename T>
void gemm_block(int64_t i, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t k, const MatrixOperand& a,
                int64_t a_bs, const MatrixOperand& b, int64_t b_bs, T* c, int64_t ldc, int64_t c_bs, double alpha,
                double beta) {
  // Row r of A starts at r*ld (stored as is) or at column r (stored transposed); column j of B likewise. A B
  // never stored has its block's origin in S instead: columns [c0, c1) are S's rows when it is transposed.
  const int64_t a_at = i * a_bs + (a.transposed ? r0 : r0 * a.ld), b_at = i * b_bs + (b.transposed ? c0 * b.ld : c0);
  const int64_t b_row0 = b.row0 + i * b.batch_rows + (b.transposed ? c0 : 0);
  const int64_t b_col0 = b.col0 + i * b_bs + (b.transposed ? 0 : c0);
  if constexpr (std::is_same_v<T, float>) {
    const PackedGemmOperand op_b =
        b.source ? PackedGemmOperand{nullptr, 0, b.transposed, b.source, b_row0, b_col0}
                 : PackedGemmOperand{static_cast<const float*>(b.data) + b_at, b.ld, b.transposed};
    packed_gemm(r1 - r0, c1 - c0, k, {static_cast<const float*>(a.data) + a_at, a.ld, a.transposed}, op_b,
                c + i * c_bs + r0 * ldc + c0, ldc, static_cast<float>(alpha), static_cast<float>(beta));
  } else {  // float64: Eigen's GEMM (only its double kernels are compiled)
    MutMap<T> out(c + i * c_bs + r0 * ldc + c0, r1 - r0, c1 - c0, Eigen::OuterStride<>(ldc));
    const ConstMap<T> A = stored<T>(a, a_at, r1 - r0, k);
    // A B never stored is written out first, its block of S as S holds it (lines of k when transposed).
    const int64_t s_rows = b.transposed ? c1 - c0 : k, s_cols = b.transposed ? k : c1 - c0;
    std::vector<T> written(b.source ? static_cast<size_t>(s_rows * s_cols) : 0);
    for (int64_t r = 0; b.source && r < s_rows; ++r)
      b.source->row(b_row0 + r, b_col0, s_cols, written.data() + r * s_cols);
    const ConstMap<T> B = b.source ? stored<T>({written.data(), s_cols, b.transposed, {}}, 0, k, c1 - c0)
                                   : stored<T>(b, b_at, k, c1 - c0);
    if (beta == 0.0)
      out.setZero();  // so that NaN garbage in c never leaks through 0 * NaN
    else if (beta != 1.0)
      out *= static_cast<T>(beta);
    const T s = static_cast<T>(alpha);
    if (!a.transposed && !b.transposed)
      out.noalias() += s * (A * B);
    else if (a.transposed && !b.transposed)
      out.noalias() += s * (A.transpose() * B);
    else if (!a.transposed && b.transposed)
      out.noalias() += s * (A * B.transpose());
    else
      out.noalias() += s * (A.transpose() * B.transpose());
  }
}

// The threads share the work in tasks that never wait for each other: whole products when the batch shares
// out evenly, else each product cut into one panel per thread along its longer side (rows or columns of the
// result). Eigen itself always runs serially. Its own parallel GEMM also splits a product, but its threads
// share packed blocks and spin-wait for each other at every block: on the small products of a detector's
// convolutions those waits took more time than the arithmetic, and it sums over k in other blocks than
// the serial GEMM does, so the bits changed with the number of threads. Serial Eigen cuts k into blocks by
// the length of k alone, so a panel's elements get the bits of the whole product: the same on any number
// of threads. So does the packed float GEMM, which cuts k into fixed blocks.
template <typename T>
void gemm_typed(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixOperand& a, int64_t a_bs,
                const MatrixOperand& b, int64_t b_bs, const Tensor& c, double alpha, double beta) {
  static const bool eigen_serial = (Eigen::setNbThreads(1), true);
  (void)eigen_serial;
  const int64_t ldc = std::max<int64_t>(c.stride(c.dim() - 2), 1);
  const int64_t c_bs = c.dim() == 3 ? c.stride(0) : 0;
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool by_rows = m > n;
  const int64_t side = by_rows ? m : n;
  // Panels only for products worth sharing, each a multiple of the alignment wide.
  const int64_t align = panel_align<T>(by_rows);
  const bool whole_products = batch % threads == 0 || batch >= 4 * threads || m * n * k < (int64_t(1) << 18);
  const int64_t panels = whole_products ? 1 : std::clamp<int64_t>(side / align, 1, threads);
  const int64_t width = ((side + panels - 1) / panels + align - 1) / align * align;
  const int64_t tasks = batch * panels;
#pragma omp parallel for schedule(dynamic, 1) if (threads > 1 && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t i = t / panels, lo = std::min(t % panels * width, side), hi = std::min(lo + width, side);
    if (lo == hi) continue;
    if (by_rows) gemm_block<T>(i, lo, hi, 0, n, k, a, a_bs, b, b_bs, c.data<T>(), ldc, c_bs, alpha, beta);
    else gemm_block<T>(i, 0, m, lo, hi, k, a, a_bs, b, b_bs, c.data<T>(), ldc, c_bs, alpha, beta);
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
