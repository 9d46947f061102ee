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

// Up to kAdamTensorsPerLaunch tensors, passed by value as kernel parameters: end[t] is the running count of
// elements up to and including tensor t, so element i of the concatenation is element i - end[t - 1] of the
// first tensor t with end[t] > i (a binary search over at most 48 entries, the same for the whole warp but at
// the joints).
template <typename T>
struct AdamTensorList {
  int count;
  int64_t end[kAdamTensorsPerLaunch];
  T* p[kAdamTensorsPerLaunch];
  const T* g[kAdamTensorsPerLaunch];
  T* m[kAdamTensorsPerLaunch];
  T* v[kAdamTensorsPerLaunch];
};

template <typename T>
__global__ void adam_many_kernel(int64_t n, AdamTensorList<T> list, AdamStep s) {
  MINIDET_KERNEL_LOOP(i, n) {
    int lo = 0, hi = list.count - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (list.end[mid] > i) hi = mid;
      else lo = mid + 1;
    }
    const int64_t j = i - (lo > 0 ? list.end[lo - 1] : 0);
    adam_element<T>(list.p[lo][j], list.g[lo][j], list.m[lo][j], list.v[lo][j], s);
  }
}

}  // namespace

void adam_update_many_cuda(const std::vector<AdamTensors>& tensors, const AdamStep& s) {
  MINIDET_CHECK(!tensors.empty() && tensors.size() <= static_cast<size_t>(kAdamTensorsPerLaunch),
                "adam_update_many_cuda: expected 1 to ", kAdamTensorsPerLaunch, " tensors, got ", tensors.size());
  const Tensor& first = tensors[0].param;
  cuda::DeviceGuard guard(first.device());
  MINIDET_DISPATCH_FLOATING(first.dtype(), "adam", [&] {
    AdamTensorList<scalar_t> list{};
    list.count = static_cast<int>(tensors.size());
    int64_t total = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      total += tensors[t].param.numel();
      list.end[t] = total;
      list.p[t] = tensors[t].param.data<scalar_t>();
      list.g[t] = tensors[t].grad.data<scalar_t>();
      list.m[t] = tensors[t].exp_avg.data<scalar_t>();
      list.v[t] = tensors[t].exp_avg_sq.data<scalar_t>();
    }
    if (total == 0) return;
    adam_many_kernel<scalar_t><<<cuda::blocks_for(total), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        total, list, s);
    MINIDET_CUDA_LAUNCH_CHECK("adam_many_kernel");
  });
}

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

}  // namespace minidet::nn::detail
