// shared_scalar(value, options): a 0-dim tensor holding `value`, shared by every caller that asks for the same
// (value, dtype, device) and kept for the whole process, for use as a read-only operand:
//
//   where(valid, scores, shared_scalar(-1.0, scores.options()))
//
// On a GPU a fresh full({}, v) costs an allocation and a fill kernel, and a detector training step compares
// with constants (labels == 1, IoU >= 0.7, where(..., -1)) hundreds of times, an allocation and a fill each; the
// comparisons with a double (elementwise_raw.h's scalar_like) and where's backward use it too. The result is
// read-only (Tensor::make_read_only): every other user of that constant would see a change, so fill_, copy_
// or any in-place op on it throws, naming shared_scalar. clone() it for a value that may change.
// At most kMaxSharedScalars are kept: a value that changes every call (a learning rate) cannot grow the
// cache; past the cap, a fresh tensor is returned each time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace minidet {

constexpr size_t kMaxSharedScalars = 512;

Tensor shared_scalar(double value, const TensorOptions& options);
// shared_arange(n, options): the read-only (n) tensor 0, 1, ..., n - 1, shared the same way. An arange is
// made on the host and uploaded; shared, the class ids a one-hot compares with (roi_heads_loss) are uploaded
// once per process instead of at every step, and a CUDA graph can record that comparison (a graph cannot
// hold an upload: core/cuda/graph.h). Aranges have a cap of their own, kMaxSharedScalars too, so scalars that
// change every call cannot crowd them out; shared_scalar_count counts both.
Tensor shared_arange(int64_t n, const TensorOptions& options);
// How many constants the process holds, scalars and aranges (at most kMaxSharedScalars of each): leak tests
// that count live storages subtract it, since a value first seen late (a data-dependent count) adds one
// constant, once.
int64_t shared_scalar_count();

}  // namespace minidet
