// take_rows: out[b, t, :] = x[b, index[b, t], :], the detector's internal gather of rows picked by topk or
// argsort (internal).
//
// gather (ops/indexing) checks its index values on the host before it reads: on CUDA a device-to-host copy,
// a host synchronisation per call. These indices come from topk or argsort along the same dim, so they are in
// range by construction, and this calls gather's raw kernel directly. Not recorded by autograd: for detached
// tensors (proposal boxes, targets).
#pragma once

#include "core/tensor.h"

namespace minidet::models::detail {

// x (B, K, C), index (B, T) int64 on x's device with values in [0, K): returns (B, T, C).
Tensor take_rows(const Tensor& x, const Tensor& index);

}  // namespace minidet::models::detail
