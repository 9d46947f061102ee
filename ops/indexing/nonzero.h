// nonzero: the positions of the non-zero elements, the one compaction op (a boolean mask -> indices).
//
//   y = nonzero(x)          x: any dtype and shape, y: (K, x.dim()) int64, K = number of x != 0
//                           row k holds the coordinates of the k-th non-zero element in row-major order
//                           (increasing flat index), as torch.nonzero. A 0-dim x gives (K, 0).
//   y = flat_nonzero(x)     (K,) int64: the flat (row-major) indices instead of coordinates
//
// Not differentiable (the output is indices). A NaN counts as non-zero, as in PyTorch.
//
// K depends on the data, so the output's size is unknown until the count is done. On CUDA the selection
// is cub::DeviceSelect::Flagged over the flat indices (flag = x != 0), which writes the count to device
// memory; that one int64 is copied to the host to allocate the output: the single, unavoidable
// device-to-host synchronisation of the op. Callers on a hot GPU path should prefer fixed-size masks.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor nonzero(const Tensor& x);
Tensor flat_nonzero(const Tensor& x);

}  // namespace minidet
