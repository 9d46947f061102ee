// Raw kernels shared by index_select, gather, where and masked_fill (not recorded).
//
// index_select and gather are the same loop once their tensors are seen in three dims (outer, dim, inner):
// x is a contiguous (outer, size, inner) block, the output a contiguous (outer, count, inner) block, and
// the index element for output (o, i, r) sits at o*stride_outer + i*stride_count + r*stride_inner of a
// contiguous int64 buffer:
//   index_select: one index per i, shared by every o and r:  strides (0, 1, 0)
//   gather:       one index per output element:              strides (count*inner, inner, 1)
//
//   take:         out[o, i, r]                 = x[o, index(o, i, r), r]
//   scatter_add:  grad_x[o, index(o, i, r), r] += grad_out[o, i, r]      (take's backward)
//
// Two outputs (o, i, r) that scatter into the same grad_x element share o and r, so the "lines" (o, r)
// never collide: the CPU loop and the CUDA deterministic kernel give each line to one thread, which adds
// its sources in increasing i. Both therefore sum in the same order and agree to the bit. The default CUDA
// kernel instead gives each source its own thread and uses atomicAdd: more parallel, order not fixed.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace minidet::ops::detail {

struct AlongDim {
  int64_t outer = 1;  // product of the sizes before dim
  int64_t size = 0;   // x's size along dim: the valid index range is [0, size)
  int64_t count = 0;  // output's size along dim
  int64_t inner = 1;  // product of the sizes after dim
  int64_t index_stride_outer = 0, index_stride_count = 1, index_stride_inner = 0;
  int64_t out_numel() const { return outer * count * inner; }
};

// Throws unless every value of `index` (int64, any device) lies in [0, size). Copies the index to the host
// to look at it: on CUDA that is a device-to-host copy and a synchronisation, the price of a clear error
// instead of an out-of-bounds read inside a kernel.
void check_index_values(const char* op, const Tensor& index, int64_t size, int64_t dim);
// The checks index_select and gather share: both tensors defined, an int64 index on x's device, x not 0-dim.
void check_index_operands(const char* op, const Tensor& x, const Tensor& index);

// out, x, index: contiguous, same device; out and x share a dtype.
void take_along_dim(const Tensor& out, const Tensor& x, const Tensor& index, const AlongDim& geometry);
// grad_x must start zeroed (or hold what to add to). Deterministic on CPU; on CUDA when
// DeterministicMode::is_enabled().
void scatter_add_along_dim(const Tensor& grad_x, const Tensor& grad_out, const Tensor& index,
                           const AlongDim& geometry);
// out = cond ? a : b, elementwise; cond (bool), a and b are already expanded to out's shape (any strides).
void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);

void take_along_dim_cpu(const Tensor& out, const Tensor& x, const Tensor& index, const AlongDim& geometry);
void scatter_add_along_dim_cpu(const Tensor& grad_x, const Tensor& grad_out, const Tensor& index,
                               const AlongDim& geometry);
void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
#if MINIDET_WITH_CUDA
void take_along_dim_cuda(const Tensor& out, const Tensor& x, const Tensor& index, const AlongDim& geometry);
void scatter_add_along_dim_cuda(const Tensor& grad_x, const Tensor& grad_out, const Tensor& index,
                                const AlongDim& geometry, bool deterministic);
void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
#endif

}  // namespace minidet::ops::detail
