// batch_norm2d and frozen_batch_norm2d: validation, the per-channel arithmetic (on C-element vectors, with
// the elementwise ops under no-grad, so it runs on either device), the autograd records, and dispatch of
// the three kernels (batch_norm_kernels.h). Formulas in batch_norm.h.
#include "ops/batch_norm/batch_norm.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/batch_norm/batch_norm_kernels.h"
#include "ops/common/checks.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"

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
                              const Tensor& v_center_any) {
  const Tensor u_center = vector_contiguous(u_center_any), v_center = vector_contiguous(v_center_any);
  BatchNormSums sums{empty({u.size(1)}, u.options()), empty({u.size(1)}, u.options())};
  MINIDET_DISPATCH_FLOATING(u.dtype(), "batch_norm2d", [&] {
    const MomentsArgs<scalar_t> args{u.size(0), u.size(1), u.size(2) * u.size(3), u.data<scalar_t>(),
                                     v.data<scalar_t>(), maybe<scalar_t>(u_center), maybe<scalar_t>(v_center),
                                     sums.sum_u.data<scalar_t>(), sums.sum_uv.data<scalar_t>()};
    if (u.is_cuda()) {
#if MINIDET_WITH_CUDA
      channel_moments_cuda(args, u.device());
#endif
    } else {
      channel_moments_cpu(args);
    }
  });
  return sums;
}

Tensor channel_affine(const Tensor& x, const Tensor& scale_any, const Tensor& shift_any) {
  const Tensor scale = scale_any.contiguous(), shift = vector_contiguous(shift_any);
  Tensor y = empty(x.sizes(), x.options());
  MINIDET_DISPATCH_FLOATING(x.dtype(), "batch_norm2d", [&] {
    const AffineArgs<scalar_t> args{x.size(0), x.size(1), x.size(2) * x.size(3), x.data<scalar_t>(),
                                    scale.data<scalar_t>(), maybe<scalar_t>(shift), y.data<scalar_t>()};
    if (x.is_cuda()) {
#if MINIDET_WITH_CUDA
      channel_affine_cuda(args, x.device());
#endif
    } else {
      channel_affine_cpu(args);
    }
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
    if (x.is_cuda()) {
#if MINIDET_WITH_CUDA
      batch_norm_backward_cuda(args, x.device());
#endif
    } else {
      batch_norm_backward_cpu(args);
    }
  });
  return dx;
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

Tensor batch_norm2d(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                    const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm2d";
  check_input(op, input);
  check_channel_vector(op, input, running_mean, "running_mean");
  check_channel_vector(op, input, running_var, "running_var");
  check_channel_vector(op, input, weight, "weight");
  check_channel_vector(op, input, bias, "bias");
  MINIDET_CHECK(eps >= 0.0, op, ": eps must be >= 0, got ", eps);
  MINIDET_CHECK(running_mean.defined() == running_var.defined(), op,
                ": pass both running_mean and running_var, or neither");
  MINIDET_CHECK(training || running_mean.defined(), op, ": eval mode needs running_mean and running_var");
  const int64_t count = input.size(0) * input.size(2) * input.size(3);  // M: values per channel
  MINIDET_CHECK(!training || count > 1, op, ": expected more than 1 value per channel when training, got input of shape ",
                input.sizes());

  Tensor x, mean, invstd, output;
  {
    NoGradGuard raw;
    x = input.contiguous();
    Tensor var;
    if (training) {
      mean = div(ops::detail::channel_moments(x, x, Tensor(), Tensor()).sum_u, static_cast<double>(count));
      var = div(ops::detail::channel_moments(x, x, mean, mean).sum_uv, static_cast<double>(count));
      if (running_mean.defined()) {  // in place, outside the graph; copy_ bumps their versions
        Tensor running_mean_buffer = running_mean, running_var_buffer = running_var;
        running_mean_buffer.copy_(add(mul(running_mean, 1.0 - momentum), mul(mean, momentum)));
        const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
        running_var_buffer.copy_(add(mul(running_var, 1.0 - momentum), mul(var, momentum * unbias)));
      }
    } else {
      // Copies, so that a later training step updating the buffers in place cannot touch this graph.
      mean = running_mean.clone();
      var = running_var;
    }
    invstd = div(1.0, sqrt(add(var, eps)));
    const Tensor scale = weight.defined() ? mul(weight, invstd) : invstd;
    const Tensor shift = bias.defined() ? sub(bias, mul(mean, scale)) : neg(mul(mean, scale));
    output = ops::detail::channel_affine(x, scale, shift);
  }
  autograd::record(op, {input, weight, bias}, {output}, {x, weight, mean, invstd},
                   [training, count](autograd::BackwardContext& ctx, const autograd::TensorList& grads)
                       -> autograd::TensorList {
                     const Tensor x = ctx.saved(0), gamma = ctx.saved(1), mean = ctx.saved(2),
                                  invstd = ctx.saved(3);
                     const Tensor dy = grads[0].contiguous();
                     const ops::detail::BatchNormSums sums = ops::detail::channel_moments(dy, x, Tensor(), mean);
                     const Tensor sum_dy_xhat = mul(sums.sum_uv, invstd);  // sum(dy * xhat)
                     const Tensor k = gamma.defined() ? mul(gamma, invstd) : invstd;
                     Tensor dx;
                     if (ctx.needs_input_grad(0)) {
                       dx = training ? ops::detail::batch_norm_backward_input(
                                           dy, x, mean, invstd, k, div(sums.sum_u, static_cast<double>(count)),
                                           div(sum_dy_xhat, static_cast<double>(count)))
                                     : ops::detail::channel_affine(dy, k, Tensor());
                     }
                     return {dx, ctx.needs_input_grad(1) ? sum_dy_xhat : Tensor(),
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
    scale = mul(weight, div(1.0, sqrt(add(running_var, eps))));
    const Tensor shift = sub(bias, mul(running_mean, scale));
    output = ops::detail::channel_affine(input.contiguous(), scale, shift);
  }
  autograd::record(op, {input}, {output}, {scale},
                   [](autograd::BackwardContext& ctx, const autograd::TensorList& grads) -> autograd::TensorList {
                     return {ops::detail::channel_affine(grads[0].contiguous(), ctx.saved(0), Tensor())};
                   });
  return output;
}

}  // namespace minidet
