// Checks for every CUDA runtime call, cuBLAS call and kernel launch. A failure throws minidet::Error naming
// the call, the CUDA error and the file and line, instead of letting a sticky error surface later.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.h"

namespace minidet::cuda {
const char* cublas_status_name(cublasStatus_t status);
}

#define MINIDET_CUDA_CHECK(expr)                                                                       \
  do {                                                                                                 \
    const cudaError_t minidet_err_ = (expr);                                                           \
    if (minidet_err_ != cudaSuccess) {                                                                 \
      (void)cudaGetLastError(); /* clear a non-sticky error so later calls are not blamed */           \
      MINIDET_FAIL("CUDA call `", #expr, "` failed: ", cudaGetErrorName(minidet_err_), " (",           \
                   cudaGetErrorString(minidet_err_), ")");                                             \
    }                                                                                                  \
  } while (0)

#define MINIDET_CUBLAS_CHECK(expr)                                                                     \
  do {                                                                                                 \
    const cublasStatus_t minidet_status_ = (expr);                                                     \
    if (minidet_status_ != CUBLAS_STATUS_SUCCESS) {                                                    \
      MINIDET_FAIL("cuBLAS call `", #expr, "` failed: ", ::minidet::cuda::cublas_status_name(minidet_status_)); \
    }                                                                                                  \
  } while (0)

// After every <<<...>>> launch: catches bad launch configurations immediately. With
// MINIDET_CUDA_SYNC_CHECKS=1 in the environment it also synchronises, so an error inside the kernel is
// reported at the launch that caused it (slow; for debugging).
#define MINIDET_CUDA_LAUNCH_CHECK(kernel_name) ::minidet::cuda::check_launch(kernel_name, __FILE__, __LINE__)

namespace minidet::cuda {
void check_launch(const char* kernel_name, const char* file, int line);
}
