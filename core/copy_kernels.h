// The kernels behind Tensor::copy_, fill_, contiguous() and to(): strided, dtype-converting copies and
// fills on one device, plus raw byte transfers between devices. Internal to core.
#pragma once

#include "core/tensor.h"

namespace minidet::detail {

// dst and src are on the same device and have the same shape; dtypes may differ; any strides.
void copy_strided_cpu(const Tensor& dst, const Tensor& src);
void fill_cpu(const Tensor& dst, double value);
#if MINIDET_WITH_CUDA
void copy_strided_cuda(const Tensor& dst, const Tensor& src);
void fill_cuda(const Tensor& dst, double value);
#endif

// nbytes from src (on src_device) to dst (on dst_device); at least one side is the host or both are GPUs.
void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device, size_t nbytes);

}  // namespace minidet::detail
