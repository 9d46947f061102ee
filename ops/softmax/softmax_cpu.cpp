// CPU softmax kernels: one row at a time, rows in parallel. Sums accumulate in double (exact enough to be
// the reference the CUDA kernels are checked against).
#include <cmath>

#include "ops/common/parallel.h"
#include "ops/softmax/softmax_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
void softmax_forward_loop(const T* x, RowLayout layout, T* y, bool log) {
  const int64_t rows = layout.rows(), n = layout.size, stride = layout.inner;
#pragma omp parallel for if (rows * n > kParallelAbove)
  for (int64_t row = 0; row < rows; ++row) {
    const T* in = x + layout.base(row);
    T* out = y + layout.base(row);
    double m = -INFINITY;
    for (int64_t k = 0; k < n; ++k) m = std::fmax(m, static_cast<double>(in[k * stride]));
    double s = 0;
    for (int64_t k = 0; k < n; ++k) s += std::exp(in[k * stride] - m);
    const double log_s = std::log(s);
    for (int64_t k = 0; k < n; ++k) {
      const double shifted = in[k * stride] - m;
      out[k * stride] = static_cast<T>(log ? shifted - log_s : std::exp(shifted) / s);
    }
  }
}

template <typename T>
void softmax_backward_loop(const T* y, const T* dy, RowLayout layout, T* dx, bool log) {
  const int64_t rows = layout.rows(), n = layout.size, stride = layout.inner;
#pragma omp parallel for if (rows * n > kParallelAbove)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t base = layout.base(row);
    // softmax needs sum_j dy_j y_j; log_softmax needs sum_j dy_j.
    double dot = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = base + k * stride;
      dot += log ? static_cast<double>(dy[i]) : static_cast<double>(dy[i]) * y[i];
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = base + k * stride;
      dx[i] = static_cast<T>(log ? dy[i] - std::exp(static_cast<double>(y[i])) * dot : y[i] * (dy[i] - dot));
    }
  }
}

}  // namespace

void softmax_forward_cpu(const Tensor& x, const RowLayout& layout, const Tensor& y, bool log) {
  MINIDET_DISPATCH_FLOATING(x.dtype(), "softmax", [&] {
    softmax_forward_loop<scalar_t>(x.data<scalar_t>(), layout, y.data<scalar_t>(), log);
  });
}

void softmax_backward_cpu(const Tensor& y, const Tensor& dy, const RowLayout& layout, const Tensor& dx, bool log) {
  MINIDET_DISPATCH_FLOATING(y.dtype(), "softmax backward", [&] {
    softmax_backward_loop<scalar_t>(y.data<scalar_t>(), dy.data<scalar_t>(), layout, dx.data<scalar_t>(), log);
  });
}

}  // namespace minidet::ops::detail
