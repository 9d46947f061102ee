// When a CPU kernel hands its loop to an OpenMP thread team.
//
// Waking a team and joining it costs a few microseconds, more on a busy machine. A loop of light work (a
// few flops per element: elementwise, reductions, copies, BatchNorm, im2col) pays that back only above a
// few tens of thousands of elements, so those kernels share this one threshold. Kernels whose elements
// cost much more (a rotated-box IoU, a RoI bin) keep a lower threshold of their own, named for what they
// count, beside the loop it guards.
#pragma once

#include <cstdint>

namespace minidet::ops::detail {

// Below this many elements of light work, the loop runs on the calling thread alone.
inline constexpr int64_t kParallelAbove = 32768;

}  // namespace minidet::ops::detail
