// shared_scalar(value, options): a 0-dim tensor holding `value`, shared by every caller that asks for the same
// (value, dtype, device) and kept for the whole process, for use as a read-only operand:
//
//   where(valid, scores, shared_scalar(-1.0, scores.options()))
//
// On a GPU a fresh full({}, v) costs an allocation and a fill kernel; a detector step uses such constants a
// few hundred times (see ops/elementwise/elementwise_raw.h's scalar_constant, which this is). NEVER write
// to the result (no fill_, copy_ or in-place op): every other user of that constant would see the change.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor shared_scalar(double value, const TensorOptions& options);
// How many constants the process holds (at most kMaxCachedScalars): leak tests that count live storages
// subtract it, since a value first seen late (a data-dependent count) adds one constant, once.
int64_t shared_scalar_count();

}  // namespace minidet
