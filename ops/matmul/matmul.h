// Matrix products: mm, bmm and matmul (with torch.matmul's vector and batch-broadcasting rules).
//
//   C = A B,  A (m, k), B (k, n), C (m, n):   C_ij = sum_p A_ip B_pj
//   backward, with G = dL/dC:                 dA = G B^T   (m, n)(n, k)
//                                             dB = A^T G   (k, m)(m, n)
// B^T and A^T are transposed *views* (swapped strides): gemm reads them in place, so backward copies nothing.
// Each product saves only what the other side's gradient needs: dA needs B, dB needs A.
//
// matmul(a, b) by the dims of its arguments (like torch.matmul):
//   1-D . 1-D          (k) . (k)              -> ()        the dot product
//   2-D @ 2-D          (m, k) @ (k, n)        -> (m, n)
//   1-D @ 2-D          (k) @ (k, n)           -> (n)       a is a 1-row matrix, the row dim is dropped
//   2-D @ 1-D          (m, k) @ (k)           -> (m)       b is a 1-column matrix, the column dim is dropped
//   N-D @ 1-D or 2-D   (..., m, k) @ (k, n)   -> (..., m, n)  the leading dims fold into the rows of one mm
//   batched            (..., m, k) @ (..., k, n) -> (..., m, n)  batch dims broadcast (NumPy rules), a 1-D
//                      operand is a matrix as above; broadcast batches are expanded views (stride 0), the
//                      engine's sum_to adds their gradients back up
// The vector and batch cases are built from differentiable views (unsqueeze, expand, reshape) around mm and
// bmm, so their gradients need no code of their own.
//
// Operands: float32 or float64, same dtype and device, any strides. k = 0 gives zeros.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor mm(const Tensor& a, const Tensor& b);      // (m, k) @ (k, n) -> (m, n)
Tensor bmm(const Tensor& a, const Tensor& b);     // (batch, m, k) @ (batch, k, n) -> (batch, m, n)
Tensor matmul(const Tensor& a, const Tensor& b);  // see the table above

}  // namespace minidet
