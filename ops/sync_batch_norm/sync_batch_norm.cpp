// sync_batch_norm2d: batch_norm2d's kernels (ops/batch_norm/batch_norm_kernels.h) around two all-reduces,
// one in forward and one in backward. The per-channel algebra between them runs as float64 C-vectors with
// the elementwise ops under no-grad, on the input's device. Formulas in sync_batch_norm.h.
#include "ops/sync_batch_norm/sync_batch_norm.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/batch_norm/batch_norm.h"
#include "ops/batch_norm/batch_norm_kernels.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/shape/cat.h"

namespace minidet {
namespace {

// The global mean and biased variance of x's channels, and 1 / M, M the number of values per channel over all
// ranks. M stays on the device: reading it back would make the host wait for the GPU at every layer.
struct GlobalMoments {
  Tensor mean, var;
  Tensor per_value;  // [1] float64: 1 / M
  Tensor count;      // [1] float64: M
};

GlobalMoments global_moments(const Tensor& x, const Tensor& shift, const AllReduceSum& all_reduce_sum) {
  const int64_t channels = x.size(1), local_count = x.size(0) * x.size(2) * x.size(3);
  const ops::detail::BatchNormSums local = ops::detail::channel_moments(x, x, shift, shift);
  const TensorOptions wide = x.options().with_dtype(kFloat64);
  Tensor packed = cat({full({1}, static_cast<double>(local_count), wide), local.sum_u.to(kFloat64),
                       local.sum_uv.to(kFloat64)});
  all_reduce_sum(packed);
  GlobalMoments out;
  out.count = packed.narrow(0, 0, 1);
  out.per_value = 1.0 / out.count;
  const Tensor mean = packed.narrow(0, 1, channels) * out.per_value;
  const Tensor spread = packed.narrow(0, 1 + channels, channels) * out.per_value;  // mean of (x - K)^2
  const Tensor offset = shift.defined() ? mean - shift.to(kFloat64) : mean;        // mean - K
  out.mean = mean;
  out.var = clamp_min(spread - offset * offset, 0.0);  // rounding may dip a flat channel below 0
  return out;
}

// running = (1 - momentum) * running + momentum * value, in place, value a float64 C-vector.
void update_running(const Tensor& running, const Tensor& value, double momentum) {
  if (running.defined()) running.copy_((running.to(kFloat64) * (1.0 - momentum) + value * momentum).to(running.dtype()));
}

}  // namespace

Tensor sync_batch_norm2d(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                         const Tensor& weight, const Tensor& bias, bool training, const AllReduceSum& all_reduce_sum,
                         double momentum, double eps) {
  const char* op = "sync_batch_norm2d";
  ops::detail::check_batch_norm_arguments(op, input, running_mean, running_var, weight, bias, training, eps);
  if (!training) return batch_norm2d(input, running_mean, running_var, weight, bias, false, momentum, eps);
  MINIDET_CHECK(static_cast<bool>(all_reduce_sum), op, ": no all-reduce given (the ranks to synchronise with)");

  Tensor x, mean, invstd, output, per_value;
  {
    NoGradGuard raw;
    x = input.contiguous();
    const GlobalMoments moments = global_moments(x, running_mean, all_reduce_sum);
    // M > 1 holds when this rank alone has 2 values per channel; otherwise it is read back and checked.
    if (x.size(0) * x.size(2) * x.size(3) < 2) {
      const double count = moments.count.to(Device::cpu()).to_vector<double>()[0];
      MINIDET_CHECK(count > 1, op, ": expected more than 1 value per channel over all ranks when training, got ",
                    count, " (this rank's input has shape ", input.sizes(), ")");
    }
    per_value = moments.per_value;
    mean = moments.mean.to(x.dtype());
    const ops::detail::ScaleShift coefficients = ops::detail::channel_scale_shift(
        mean, moments.var.to(x.dtype()), weight, bias, eps, Tensor(), Tensor(), momentum, 1.0, false);
    // The running variance is the unbiased one, var * M / (M - 1), as batch_norm2d's.
    update_running(running_mean, moments.mean, momentum);
    update_running(running_var, moments.var * moments.count / (moments.count - 1.0), momentum);
    invstd = coefficients.invstd;
    output = ops::detail::channel_affine(x, coefficients.scale, coefficients.shift);
  }
  autograd::record(op, {input, weight, bias}, {output}, {x, weight, mean, invstd},
                   [per_value, all_reduce_sum](autograd::BackwardContext& ctx,
                                           const autograd::TensorList& grads) -> autograd::TensorList {
                     const Tensor x = ctx.saved(0), gamma = ctx.saved(1), mean = ctx.saved(2),
                                  invstd = ctx.saved(3);
                     const Tensor dy = grads[0].contiguous();
                     const int64_t channels = x.size(1);
                     // This rank's sums give dgamma and dbeta; all ranks' sums give dx.
                     const ops::detail::BatchNormSums local = ops::detail::channel_moments(dy, x, Tensor(), mean);
                     Tensor packed = cat({local.sum_u.to(kFloat64), local.sum_uv.to(kFloat64)});
                     all_reduce_sum(packed);
                     // The global sums over M, the means the coefficients want (hence their count of 1).
                     packed = packed * per_value;
                     const ops::detail::BatchNormSums global{packed.narrow(0, 0, channels).to(x.dtype()),
                                                             packed.narrow(0, channels, channels).to(x.dtype())};
                     const ops::detail::BackwardCoefficients c =
                         ops::detail::backward_coefficients(global, invstd, gamma, 1);
                     Tensor dx;
                     if (ctx.needs_input_grad(0))
                       dx = ops::detail::batch_norm_backward_input(dy, x, mean, invstd, c.k, c.mean_dy,
                                                                   c.mean_dy_xhat);
                     return {dx, ctx.needs_input_grad(1) ? local.sum_uv * invstd : Tensor(),
                             ctx.needs_input_grad(2) ? local.sum_u : Tensor()};
                   });
  return output;
}

}  // namespace minidet
