// MINIDET_DEVICE_SWITCH(on, cpu_call, cuda_call): the one place where an op picks its CPU or its CUDA
// launcher, so that every op's .cpp reads the same.
//
//   MINIDET_DEVICE_SWITCH(out, take_rows_cpu(out, x, index), take_rows_cuda(out, x, index));
//   return MINIDET_DEVICE_SWITCH(input, flat_nonzero_cpu(input), flat_nonzero_cuda(input));
//   MINIDET_DEVICE_SWITCH(grad, roi_pool_backward_cpu(grad, rois, argmax, dx, g),
//                         roi_pool_backward_cuda(grad, rois, argmax, dx, g, DeterministicMode::is_enabled()));
//
// `on` is the tensor (or Device) whose device decides. The switch is an expression: its value is the chosen
// call's (void, a Tensor, an index), so both calls have the same type. A branch of several statements is a
// lambda called in place, `[&] { ... }()`. Commas inside a call's parentheses are fine; a comma outside them
// (a braced list, template arguments) needs a pair of parentheses around it.
//
// Why a macro: <op>_kernels.h declares the CUDA launchers only under #if MINIDET_WITH_CUDA, so in a CPU-only
// build the CUDA call must be gone before the compiler reads it. There the CUDA branch throws instead: no
// CUDA tensor can exist in such a build, so reaching it is a bug, and it says so rather than doing nothing.
#pragma once

#include "core/error.h"

#if MINIDET_WITH_CUDA
#define MINIDET_DEVICE_SWITCH(on, cpu_call, cuda_call) ((on).is_cuda() ? (cuda_call) : (cpu_call))
#else
#define MINIDET_DEVICE_SWITCH(on, cpu_call, cuda_call)                                                      \
  ((on).is_cuda() ? throw ::minidet::Error("a CUDA tensor reached an op, but minidet was built without CUDA", \
                                           __FILE__, __LINE__)                                            \
                  : (cpu_call))
#endif
