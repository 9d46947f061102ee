#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "nn/optim/optim_kernels.h"
#include "nn/optim/optim_math.h"

namespace minidet::nn::detail {
namespace {

template <typename T>
__global__ void sgd_kernel(int64_t n, T* p, const T* g, T* buf, SgdStep s) {
  MINIDET_KERNEL_LOOP(i, n) { sgd_element<T>(p[i], g[i], buf ? buf + i : nullptr, s); }
}

template <typename T>
__global__ void adam_kernel(int64_t n, T* p, const T* g, T* m, T* v, AdamStep s) {
  MINIDET_KERNEL_LOOP(i, n) { adam_element<T>(p[i], g[i], m[i], v[i], s); }
}

}  // namespace

void sgd_update_cuda(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdStep& s) {
  const int64_t n = param.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(param.device());
  MINIDET_DISPATCH_FLOATING(param.dtype(), "sgd", [&] {
    sgd_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, param.data<scalar_t>(), grad.data<scalar_t>(), buf.defined() ? buf.data<scalar_t>() : nullptr, s);
    MINIDET_CUDA_LAUNCH_CHECK("sgd_kernel");
  });
}

void adam_update_cuda(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& s) {
  const int64_t n = param.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(param.device());
  MINIDET_DISPATCH_FLOATING(param.dtype(), "adam", [&] {
    adam_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, param.data<scalar_t>(), grad.data<scalar_t>(), m.data<scalar_t>(), v.data<scalar_t>(), s);
    MINIDET_CUDA_LAUNCH_CHECK("adam_kernel");
  });
}

}  // namespace minidet::nn::detail
