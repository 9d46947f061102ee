#pragma once

// Functions that compile for both the host and the GPU (index helpers shared by CPU and CUDA kernels).
#ifdef __CUDACC__
#define MINIDET_HOST_DEVICE __host__ __device__
#else
#define MINIDET_HOST_DEVICE
#endif
