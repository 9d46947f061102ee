// The indexing family's shared op-level code (for index_select, gather, where and masked_fill): index
// validation and the device switch for the indexing kernels (indexing_kernels.h).
#include "core/deterministic.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/indexing/indexing_kernels.h"

namespace minidet::ops::detail {

void check_index_operands(const char* op, const Tensor& x, const Tensor& index) {
  check_defined(op, x, "x");
  check_defined(op, index, "index");
  MINIDET_CHECK(index.dtype() == kInt64, op, ": expected index of dtype int64, got ", index.dtype());
  check_same_device(op, x, "x", index, "index");
  MINIDET_CHECK(x.dim() >= 1, op, ": expected x with at least 1 dim, got a 0-dim tensor");
}

void check_index_values(const char* op, const Tensor& index, int64_t size, int64_t dim) {
  if (index.numel() == 0) return;
  const std::vector<int64_t> values = index.to_vector<int64_t>();  // device -> host on CUDA (see header)
  for (size_t p = 0; p < values.size(); ++p) {
    if (values[p] >= 0 && values[p] < size) continue;
    if (size == 0)
      MINIDET_FAIL(op, ": index ", values[p], " at position ", p, " is out of range: dim ", dim,
                   " has size 0, so no index is valid");
    MINIDET_FAIL(op, ": index ", values[p], " at position ", p, " is out of range for dim ", dim, " of size ",
                 size, " (valid range 0 to ", size - 1, ")");
  }
}

void take_along_dim(const Tensor& out, const Tensor& x, const Tensor& index, const AlongDim& geometry) {
  if (geometry.out_numel() == 0) return;
  MINIDET_DEVICE_SWITCH(out, take_along_dim_cpu(out, x, index, geometry), take_along_dim_cuda(out, x, index, geometry));
}

void scatter_add_along_dim(const Tensor& grad_x, const Tensor& grad_out, const Tensor& index,
                           const AlongDim& geometry) {
  if (geometry.out_numel() == 0) return;
  MINIDET_DEVICE_SWITCH(grad_x, scatter_add_along_dim_cpu(grad_x, grad_out, index, geometry),
                        scatter_add_along_dim_cuda(grad_x, grad_out, index, geometry, DeterministicMode::is_enabled()));
}

void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(out, where_cpu(out, cond, a, b), where_cuda(out, cond, a, b));
}

}  // namespace minidet::ops::detail
