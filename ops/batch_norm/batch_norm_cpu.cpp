// CPU batch-norm kernels. The reduction is parallel over channels (each channel's sum is one thread's loop,
// in float64, in a fixed order); the elementwise kernels are parallel over (n, c) planes.
#include "ops/batch_norm/batch_norm_kernels.h"
#include "ops/common/parallel.h"

namespace minidet::ops::detail {

template <typename T>
void channel_moments_cpu(const MomentsArgs<T>& a) {
#pragma omp parallel for schedule(static) if (a.batch * a.channels * a.plane > kParallelAbove)
  for (int64_t c = 0; c < a.channels; ++c) {
    const double u_center = a.u_center ? a.u_center[c] : 0.0, v_center = a.v_center ? a.v_center[c] : 0.0;
    double sum_u = 0.0, sum_uv = 0.0;
    for (int64_t n = 0; n < a.batch; ++n) {
      const int64_t base = (n * a.channels + c) * a.plane;
      for (int64_t k = 0; k < a.plane; ++k) {
        const double u = a.u[base + k];
        sum_u += u;
        sum_uv += (u - u_center) * (static_cast<double>(a.v[base + k]) - v_center);
      }
    }
    a.sum_u[c] = static_cast<T>(sum_u * a.scale);
    a.sum_uv[c] = static_cast<T>(sum_uv * a.scale);
  }
}

template <typename T>
void channel_affine_cpu(const AffineArgs<T>& a) {
  const int64_t planes = a.batch * a.channels;
#pragma omp parallel for schedule(static) if (planes * a.plane > kParallelAbove)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const int64_t c = nc % a.channels;
    const T scale = a.scale[c], shift = a.shift ? a.shift[c] : T(0);
    const T* x = a.x + nc * a.plane;
    T* y = a.y + nc * a.plane;
    for (int64_t k = 0; k < a.plane; ++k) y[k] = x[k] * scale + shift;
  }
}

template <typename T>
void batch_norm_backward_cpu(const BackwardArgs<T>& a) {
  const int64_t planes = a.batch * a.channels;
#pragma omp parallel for schedule(static) if (planes * a.plane > kParallelAbove)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const int64_t c = nc % a.channels;
    const T* dy = a.grad_output + nc * a.plane;
    const T* x = a.x + nc * a.plane;
    T* dx = a.grad_input + nc * a.plane;
    for (int64_t k = 0; k < a.plane; ++k) {
      const T xhat = (x[k] - a.mean[c]) * a.invstd[c];
      dx[k] = a.k[c] * (dy[k] - a.mean_dy[c] - xhat * a.mean_dy_xhat[c]);
    }
  }
}

template <typename T>
void channel_scale_shift_cpu(const ScaleShiftArgs<T>& a) {
  for (int64_t c = 0; c < a.channels; ++c) scale_shift_channel(a, c);
}

template <typename T>
void backward_coefficients_cpu(const BackwardCoefficientsArgs<T>& a) {
  for (int64_t c = 0; c < a.channels; ++c) backward_coefficients_channel(a, c);
}

template void channel_moments_cpu<float>(const MomentsArgs<float>&);
template void channel_moments_cpu<double>(const MomentsArgs<double>&);
template void channel_affine_cpu<float>(const AffineArgs<float>&);
template void channel_affine_cpu<double>(const AffineArgs<double>&);
template void batch_norm_backward_cpu<float>(const BackwardArgs<float>&);
template void batch_norm_backward_cpu<double>(const BackwardArgs<double>&);
template void channel_scale_shift_cpu<float>(const ScaleShiftArgs<float>&);
template void channel_scale_shift_cpu<double>(const ScaleShiftArgs<double>&);
template void backward_coefficients_cpu<float>(const BackwardCoefficientsArgs<float>&);
template void backward_coefficients_cpu<double>(const BackwardCoefficientsArgs<double>&);

}  // namespace minidet::ops::detail
