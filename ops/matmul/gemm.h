// Raw matrix products for every op that needs one (matmul, bmm, linear, conv2d's im2col lowering): on the
// CPU minidet's own packed GEMM for float32 (packed_gemm.h) and Eigen's for float64, cuBLAS on CUDA. Not
// recorded by autograd.
//
//   gemm(a, b, c, alpha, beta):   c = alpha * a @ b + beta * c
//
// a (m, k), b (k, n), c (m, n) are 2-D tensors. a and b may be transposed views (a.t()): a matrix whose
// column stride is 1 is read row-major, one whose row stride is 1 is read as the transpose of a row-major
// matrix, so .t() never costs a copy; anything else is made contiguous first. c must be row-major with a
// unit column stride. The batched form takes (batch, m, k) x (batch, k, n) -> (batch, m, n).
//
// cuBLAS is column-major. A row-major C = A B is the column-major C^T = B^T A^T, so the CUDA path calls
// cuBLAS with the operands swapped, and never transposes any data.
//
// On the CPU, B may also be a matrix that is never stored (row_source.h): each product then reads a block of it,
// the i-th starting at S's row row0 + i * batch_rows and column col0 + i * batch_cols, as is or transposed.
#pragma once

#include "core/tensor.h"
#include "ops/matmul/row_source.h"

namespace minidet::ops {

void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha = 1.0, double beta = 0.0);
void gemm_batched(const Tensor& a, const Tensor& b, const Tensor& c, double alpha = 1.0, double beta = 0.0);

struct SourceOperand {
  const detail::RowSource* source;
  int64_t row0 = 0, col0 = 0;              // where product 0's block starts in S
  int64_t batch_rows = 0, batch_cols = 0;  // how far product i's block is moved from it, per i
  bool transposed = false;                 // op(block) = block^T: the block's rows are op(B)'s columns
};
// a (batch, m, k) and c (batch, m, n) on the CPU: c_i = alpha * a_i @ op(block_i of S) + beta * c_i.
void gemm_batched(const Tensor& a, const SourceOperand& b, const Tensor& c, double alpha = 1.0, double beta = 0.0);

namespace detail {

// A row-major view of a matrix operand as BLAS sees it: data, leading dimension, and whether to transpose. Or,
// on the CPU, a source and where the operand's block lies in it (the batch stride then counts S's columns, and
// batch_rows S's rows).
struct MatrixOperand {
  const void* data;
  int64_t ld;
  bool transposed;
  Tensor keep_alive;  // the contiguous copy, when one had to be made
  const RowSource* source = nullptr;
  int64_t row0 = 0, col0 = 0, batch_rows = 0;
};
// `batch_dims` leading dims are batch (their stride is returned in batch_stride).
MatrixOperand describe_operand(const Tensor& t, int64_t batch_dims, int64_t* batch_stride);

void gemm_cpu(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixOperand& a, int64_t a_batch_stride,
              const MatrixOperand& b, int64_t b_batch_stride, const Tensor& c, double alpha, double beta);
#if MINIDET_WITH_CUDA
void gemm_cuda(int64_t batch, int64_t m, int64_t n, int64_t k, const MatrixOperand& a, int64_t a_batch_stride,
               const MatrixOperand& b, int64_t b_batch_stride, const Tensor& c, double alpha, double beta);
#endif

}  // namespace detail
}  // namespace minidet::ops
