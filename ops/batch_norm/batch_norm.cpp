// batch_norm2d and frozen_batch_norm2d: validation, the per-channel arithmetic (on C-element vectors, with
// the elementwise ops under no-grad, so it runs on either device), the autograd records, and dispatch of
// the three kernels (batch_norm_kernels.h). Formulas in batch_norm.h.
#include "ops/batch_norm/batch_norm.h"

#include <algorithm>
#include <utility>

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/batch_norm/batch_norm_kernels.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"

namespace minidet {
namespace ops::detail {
namespace {

template <typename T>
const T* maybe(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

Tensor vector_contiguous(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

}  // namespace

BatchNormSums channel_moments(const Tensor& u, const Tensor& v, const Tensor& u_center_any,
                              const Tensor& v_center_any, double scale) {
  const Tensor u_center = vector_contiguous(u_center_any), v_center = vector_contiguous(v_center_any);
  BatchNormSums sums{empty({u.size(1)}, u.options()), empty({u.size(1)}, u.options())};
  MINIDET_DISPATCH_FLOATING(u.dtype(), "batch_norm2d", [&] {
    const MomentsArgs<scalar_t> args{u.size(0), u.size(1), u.size(2) * u.size(3), u.data<scalar_t>(),
                                     v.data<scalar_t>(), maybe<scalar_t>(u_center), maybe<scalar_t>(v_center),
                                     sums.sum_u.data<scalar_t>(), sums.sum_uv.data<scalar_t>(), scale};
    MINIDET_DEVICE_SWITCH(u, channel_moments_cpu(args), channel_moments_cuda(args, u.device()));
  });
  return sums;
}

Tensor channel_affine(const Tensor& x, const Tensor& scale_any, const Tensor& shift_any) {
  const Tensor scale = scale_any.contiguous(), shift = vector_contiguous(shift_any);
  Tensor y = empty(x.sizes(), x.options());
  MINIDET_DISPATCH_FLOATING(x.dtype(), "batch_norm2d", [&] {
    const AffineArgs<scalar_t> args{x.size(0), x.size(1), x.size(2) * x.size(3), x.data<scalar_t>(),
                                    scale.data<scalar_t>(), maybe<scalar_t>(shift), y.data<scalar_t>()};
    MINIDET_DEVICE_SWITCH(x, channel_affine_cpu(args), channel_affine_cuda(args, x.device()));
  });
  return y;
}

Tensor batch_norm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                 const Tensor& k, const Tensor& mean_dy, const Tensor& mean_dy_xhat) {
  Tensor dx = empty(x.sizes(), x.options());
  const Tensor vectors[5] = {mean.contiguous(), invstd.contiguous(), k.contiguous(), mean_dy.contiguous(),
                             mean_dy_xhat.contiguous()};
  MINIDET_DISPATCH_FLOATING(x.dtype(), "batch_norm2d", [&] {
    const BackwardArgs<scalar_t> args{x.size(0), x.size(1), x.size(2) * x.size(3), dy.data<scalar_t>(),
                                      x.data<scalar_t>(), vectors[0].data<scalar_t>(), vectors[1].data<scalar_t>(),
                                      vectors[2].data<scalar_t>(), vectors[3].data<scalar_t>(),
                                      vectors[4].data<scalar_t>(), dx.data<scalar_t>()};
    MINIDET_DEVICE_SWITCH(x, batch_norm_backward_cpu(args), batch_norm_backward_cuda(args, x.device()));
  });
  return dx;
}

ScaleShift channel_scale_shift(const Tensor& mean_any, const Tensor& var_any, const Tensor& weight_any,
                               const Tensor& bias_any, double eps, const Tensor& running_mean,
                               const Tensor& running_var, double momentum, double unbias, bool copy_mean) {
  const Tensor mean = mean_any.contiguous(), var = var_any.contiguous(), weight = vector_contiguous(weight_any),
               bias = vector_contiguous(bias_any);
  // The kernel writes the running statistics through their pointers: a strided buffer is updated through a
  // contiguous copy, written back below.
  const Tensor rm = vector_contiguous(running_mean), rv = vector_contiguous(running_var);
  const int64_t channels = mean.numel();
  ScaleShift out{copy_mean ? empty({channels}, mean.options()) : Tensor(), empty({channels}, mean.options()),
                 empty({channels}, mean.options()), empty({channels}, mean.options())};
  MINIDET_DISPATCH_FLOATING(mean.dtype(), "batch_norm2d", [&] {
    const ScaleShiftArgs<scalar_t> args{channels,
                                        mean.data<scalar_t>(),
                                        var.data<scalar_t>(),
                                        maybe<scalar_t>(weight),
                                        maybe<scalar_t>(bias),
                                        eps,
                                        momentum,
                                        unbias,
                                        rm.defined() ? rm.data<scalar_t>() : nullptr,
                                        rv.defined() ? rv.data<scalar_t>() : nullptr,
                                        out.mean.defined() ? out.mean.data<scalar_t>() : nullptr,
                                        out.invstd.data<scalar_t>(),
                                        out.scale.data<scalar_t>(),
                                        out.shift.data<scalar_t>()};
    MINIDET_DEVICE_SWITCH(mean, channel_scale_shift_cpu(args), channel_scale_shift_cuda(args, mean.device()));
  });
  for (const auto& [buffer, written] : {std::pair{running_mean, rm}, std::pair{running_var, rv}}) {
    if (!buffer.defined()) continue;
    if (!written.is_same(buffer)) buffer.copy_(written);  // copy_ bumps the version
    else buffer.bump_version();  // written in place: saved copies of it are stale now
  }
  return out;
}

BackwardCoefficients backward_coefficients(const BatchNormSums& sums, const Tensor& invstd, const Tensor& weight_any,
                                           int64_t count) {
  const Tensor weight = vector_contiguous(weight_any);
  const int64_t channels = invstd.numel();
  BackwardCoefficients out{empty({channels}, invstd.options()), empty({channels}, invstd.options()),
                           empty({channels}, invstd.options()), empty({channels}, invstd.options())};
  MINIDET_DISPATCH_FLOATING(invstd.dtype(), "batch_norm2d", [&] {
    const BackwardCoefficientsArgs<scalar_t> args{
        channels,           1.0 / static_cast<double>(count), sums.sum_u.data<scalar_t>(),
        sums.sum_uv.data<scalar_t>(), invstd.data<scalar_t>(), maybe<scalar_t>(weight),
        out.grad_weight.data<scalar_t>(), out.k.data<scalar_t>(), out.mean_dy.data<scalar_t>(),
        out.mean_dy_xhat.data<scalar_t>()};
    MINIDET_DEVICE_SWITCH(invstd, backward_coefficients_cpu(args), backward_coefficients_cuda(args, invstd.device()));
  });
  return out;
}

}  // namespace ops::detail

namespace {

void check_channel_vector(const char* op, const Tensor& input, const Tensor& t, const char* name) {
  if (!t.defined()) return;
  ops::check_same_dtype(op, input, "input", t, name);
  ops::check_same_device(op, input, "input", t, name);
  MINIDET_CHECK(t.dim() == 1 && t.size(0) == input.size(1), op, ": expected ", name, " of shape (", input.size(1),
                ",) for input with ", input.size(1), " channels, got ", t.sizes());
}

void check_input(const char* op, const Tensor& input) {
  ops::check_defined(op, input, "input");
  ops::check_dim(op, input, "input (N, C, H, W)", 4);
  ops::check_floating(op, input, "input");
}

}  // namespace

void ops::detail::check_batch_norm_arguments(const char* op, const Tensor& input, const Tensor& running_mean,
                                             const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                                             bool training, double eps) {
  check_input(op, input);
  check_channel_vector(op, input, running_mean, "running_mean");
  check_channel_vector(op, input, running_var, "running_var");
  check_channel_vector(op, input, weight, "weight");
  check_channel_vector(op, input, bias, "bias");
  MINIDET_CHECK(eps >= 0.0, op, ": eps must be >= 0, got ", eps);
  MINIDET_CHECK(running_mean.defined() == running_var.defined(), op,
                ": pass both running_mean and running_var, or neither");
  MINIDET_CHECK(training || running_mean.defined(), op, ": eval mode needs running_mean and running_var");
}

Tensor batch_norm2d(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                    const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm2d";
  ops::detail::check_batch_norm_arguments(op, input, running_mean, running_var, weight, bias, training, eps);
  const int64_t count = input.size(0) * input.size(2) * input.size(3);  // M: values per channel
  MINIDET_CHECK(!training || count > 1, op, ": expected more than 1 value per channel when training, got input of shape ",
                input.sizes());

  Tensor x, mean, invstd, output;
  {
    NoGradGuard raw;
    x = input.contiguous();
    // Training: the batch's mean, then its biased variance about that mean (two passes, for accuracy), and
    // the running statistics move towards them (with the unbiased variance). Eval: the running statistics,
    // copied (mean_copy), so that a later training step updating them in place cannot touch this graph.
    Tensor var;
    if (training) {
      const double per_value = 1.0 / static_cast<double>(count);
      mean = ops::detail::channel_moments(x, x, Tensor(), Tensor(), per_value).sum_u;
      var = ops::detail::channel_moments(x, x, mean, mean, per_value).sum_uv;
    }
    const double unbias = static_cast<double>(count) / static_cast<double>(std::max<int64_t>(1, count - 1));
    const ops::detail::ScaleShift coefficients = ops::detail::channel_scale_shift(
        training ? mean : running_mean, training ? var : running_var, weight, bias, eps,
        training ? running_mean : Tensor(), training ? running_var : Tensor(), momentum, unbias, !training);
    if (!training) mean = coefficients.mean;
    invstd = coefficients.invstd;
    output = ops::detail::channel_affine(x, coefficients.scale, coefficients.shift);
  }
  autograd::record(op, {input, weight, bias}, {output}, {x, weight, mean, invstd},
                   [training, count](autograd::BackwardContext& ctx, const autograd::TensorList& grads)
                       -> autograd::TensorList {
                     const Tensor x = ctx.saved(0), gamma = ctx.saved(1), mean = ctx.saved(2),
                                  invstd = ctx.saved(3);
                     const Tensor dy = grads[0].contiguous();
                     const ops::detail::BatchNormSums sums = ops::detail::channel_moments(dy, x, Tensor(), mean);
                     const ops::detail::BackwardCoefficients c =
                         ops::detail::backward_coefficients(sums, invstd, gamma, count);
                     Tensor dx;
                     if (ctx.needs_input_grad(0)) {
                       dx = training ? ops::detail::batch_norm_backward_input(dy, x, mean, invstd, c.k, c.mean_dy,
                                                                              c.mean_dy_xhat)
                                     : ops::detail::channel_affine(dy, c.k, Tensor());
                     }
                     return {dx, ctx.needs_input_grad(1) ? c.grad_weight : Tensor(),
                             ctx.needs_input_grad(2) ? sums.sum_u : Tensor()};
                   });
  return output;
}

Tensor frozen_batch_norm2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, double eps) {
  const char* op = "frozen_batch_norm2d";
  check_input(op, input);
  const auto check_parameter = [&](const Tensor& t, const char* name) {
    ops::check_defined(op, t, name);
    check_channel_vector(op, input, t, name);
  };
  check_parameter(weight, "weight");
  check_parameter(bias, "bias");
  check_parameter(running_mean, "running_mean");
  check_parameter(running_var, "running_var");
  MINIDET_CHECK(eps >= 0.0, op, ": eps must be >= 0, got ", eps);
  Tensor scale, output;
  {
    NoGradGuard raw;  // the parameters are constants here, even if a caller marked them requires_grad
    const ops::detail::ScaleShift coefficients = ops::detail::channel_scale_shift(
        running_mean, running_var, weight, bias, eps, Tensor(), Tensor(), 0.0, 1.0, false);
    scale = coefficients.scale;
    output = ops::detail::channel_affine(input.contiguous(), scale, coefficients.shift);
  }
  autograd::record(op, {input}, {output}, {scale},
                   [](autograd::BackwardContext& ctx, const autograd::TensorList& grads) -> autograd::TensorList {
                     return {ops::detail::channel_affine(grads[0].contiguous(), ctx.saved(0), Tensor())};
                   });
  return output;
}

}  // namespace minidet
