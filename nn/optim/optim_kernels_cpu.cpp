#include "nn/optim/optim_kernels.h"
#include "nn/optim/optim_math.h"
#include "ops/common/device_switch.h"

namespace minidet::nn::detail {
namespace {

template <typename T>
void sgd_loop(T* p, const T* g, T* buf, int64_t n, const SgdStep& s) {
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) sgd_element<T>(p[i], g[i], buf ? buf + i : nullptr, s);
}

template <typename T>
void adam_loop(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep& s) {
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) adam_element<T>(p[i], g[i], m[i], v[i], s);
}

}  // namespace

void sgd_update_cpu(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdStep& s) {
  MINIDET_DISPATCH_FLOATING(param.dtype(), "sgd", [&] {
    sgd_loop<scalar_t>(param.data<scalar_t>(), grad.data<scalar_t>(), buf.defined() ? buf.data<scalar_t>() : nullptr,
                       param.numel(), s);
  });
}

void adam_update_cpu(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& s) {
  MINIDET_DISPATCH_FLOATING(param.dtype(), "adam", [&] {
    adam_loop<scalar_t>(param.data<scalar_t>(), grad.data<scalar_t>(), m.data<scalar_t>(), v.data<scalar_t>(),
                        param.numel(), s);
  });
}

namespace {
void check_like_param(const char* op, const Tensor& param, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  MINIDET_CHECK(t.device() == param.device() && t.dtype() == param.dtype() && t.sizes() == param.sizes(), op, ": ",
                what, " is ", t.sizes(), " ", t.dtype(), " on ", t.device(), " but the parameter is ", param.sizes(),
                " ", param.dtype(), " on ", param.device());
}
}  // namespace

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdStep& s) {
  check_like_param("sgd", param, grad, "the gradient");
  check_like_param("sgd", param, buf, "the momentum buffer");
  MINIDET_CHECK(grad.is_contiguous() && grad.sizes() == param.sizes(), "sgd: gradient of shape ", grad.sizes(),
                " does not match the parameter ", param.sizes(), " (or is not contiguous)");
  param.bump_version();  // before the write: a read-only tensor (core/storage.h) throws unchanged
  MINIDET_DEVICE_SWITCH(param, sgd_update_cpu(param, grad, buf, s), sgd_update_cuda(param, grad, buf, s));
}

namespace {
void check_adam(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v) {
  check_like_param("adam", param, grad, "the gradient");
  check_like_param("adam", param, m, "exp_avg");
  check_like_param("adam", param, v, "exp_avg_sq");
  MINIDET_CHECK(grad.is_contiguous() && grad.sizes() == param.sizes(), "adam: gradient of shape ", grad.sizes(),
                " does not match the parameter ", param.sizes(), " (or is not contiguous)");
}
}  // namespace

void adam_update_many(const std::vector<AdamTensors>& tensors, const AdamStep& s) {
  for (const AdamTensors& t : tensors) check_adam(t.param, t.grad, t.exp_avg, t.exp_avg_sq);
  // Before the writes: a read-only tensor (core/storage.h) throws with every parameter unchanged.
  for (const AdamTensors& t : tensors) t.param.bump_version();
#if MINIDET_WITH_CUDA
  // Runs of one GPU and dtype, cut into launches of at most kAdamTensorsPerLaunch.
  std::vector<AdamTensors> run;
  const auto flush = [&] {
    if (!run.empty()) adam_update_many_cuda(run, s);
    run.clear();
  };
  for (const AdamTensors& t : tensors) {
    if (!t.param.is_cuda()) {
      flush();
      adam_update_cpu(t.param, t.grad, t.exp_avg, t.exp_avg_sq, s);
      continue;
    }
    if (!run.empty() && (run.size() == kAdamTensorsPerLaunch || run[0].param.device() != t.param.device() ||
                         run[0].param.dtype() != t.param.dtype()))
      flush();
    run.push_back(t);
  }
  flush();
#else
  for (const AdamTensors& t : tensors) adam_update_cpu(t.param, t.grad, t.exp_avg, t.exp_avg_sq, s);
#endif
}

}  // namespace minidet::nn::detail
