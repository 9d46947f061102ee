// CPU pooling kernels, parallel over (n, c) planes. Backward passes scatter within their own plane, in
// output order, so no two threads touch the same element and the sums are deterministic.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/common/parallel.h"
#include "ops/pooling/pool2d_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
void max_forward(const T* in, T* out, int64_t* indices, const PoolGeometry& g) {
  const int64_t in_plane = g.height * g.width, out_plane = g.out_h * g.out_w;
#pragma omp parallel for schedule(static) if (g.planes * (in_plane + out_plane) > kParallelAbove)
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    const T* src = in + plane * in_plane;
    for (int64_t p = 0; p < g.out_h; ++p) {
      const int64_t h0 = std::max<int64_t>(p * g.stride_h - g.pad_h, 0);
      const int64_t h1 = std::min<int64_t>(p * g.stride_h - g.pad_h + g.kernel_h, g.height);
      for (int64_t q = 0; q < g.out_w; ++q) {
        const int64_t w0 = std::max<int64_t>(q * g.stride_w - g.pad_w, 0);
        const int64_t w1 = std::min<int64_t>(q * g.stride_w - g.pad_w + g.kernel_w, g.width);
        T best = -std::numeric_limits<T>::infinity();
        int64_t best_index = h0 * g.width + w0;
        for (int64_t y = h0; y < h1; ++y)
          for (int64_t x = w0; x < w1; ++x) {
            const T v = src[y * g.width + x];
            if (v > best || std::isnan(v)) {  // the first maximum wins ties; NaN propagates
              best = v;
              best_index = y * g.width + x;
            }
          }
        out[plane * out_plane + p * g.out_w + q] = best;
        indices[plane * out_plane + p * g.out_w + q] = best_index;
      }
    }
  }
}

template <typename T>
void max_backward(const T* grad_out, const int64_t* indices, T* grad_in, const PoolGeometry& g) {
  const int64_t in_plane = g.height * g.width, out_plane = g.out_h * g.out_w;
#pragma omp parallel for schedule(static) if (g.planes * (in_plane + out_plane) > kParallelAbove)
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    T* dst = grad_in + plane * in_plane;
    for (int64_t k = 0; k < in_plane; ++k) dst[k] = T(0);
    for (int64_t o = 0; o < out_plane; ++o) dst[indices[plane * out_plane + o]] += grad_out[plane * out_plane + o];
  }
}

template <typename T>
void avg_forward(const T* in, T* out, const PoolGeometry& g) {
  const int64_t in_plane = g.height * g.width, out_plane = g.out_h * g.out_w;
#pragma omp parallel for schedule(static) if (g.planes * (in_plane + out_plane) > kParallelAbove)
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    const T* src = in + plane * in_plane;
    for (int64_t p = 0; p < g.out_h; ++p)
      for (int64_t q = 0; q < g.out_w; ++q) {
        const AvgWindow w = avg_window(g, p, q);
        T sum = 0;
        for (int64_t y = w.h0; y < w.h1; ++y)
          for (int64_t x = w.w0; x < w.w1; ++x) sum += src[y * g.width + x];
        out[plane * out_plane + p * g.out_w + q] = sum / static_cast<T>(w.divisor);
      }
  }
}

template <typename T>
void avg_backward(const T* grad_out, T* grad_in, const PoolGeometry& g) {
  const int64_t in_plane = g.height * g.width, out_plane = g.out_h * g.out_w;
#pragma omp parallel for schedule(static) if (g.planes * (in_plane + out_plane) > kParallelAbove)
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    T* dst = grad_in + plane * in_plane;
    for (int64_t k = 0; k < in_plane; ++k) dst[k] = T(0);
    for (int64_t p = 0; p < g.out_h; ++p)
      for (int64_t q = 0; q < g.out_w; ++q) {
        const AvgWindow w = avg_window(g, p, q);
        const T share = grad_out[plane * out_plane + p * g.out_w + q] / static_cast<T>(w.divisor);
        for (int64_t y = w.h0; y < w.h1; ++y)
          for (int64_t x = w.w0; x < w.w1; ++x) dst[y * g.width + x] += share;
      }
  }
}

}  // namespace

void max_pool2d_forward_cpu(const Tensor& input, const Tensor& output, const Tensor& indices, const PoolGeometry& g) {
  MINIDET_DISPATCH_FLOATING(input.dtype(), "max_pool2d", [&] {
    max_forward<scalar_t>(input.data<scalar_t>(), output.data<scalar_t>(), indices.data<int64_t>(), g);
  });
}

void max_pool2d_backward_cpu(const Tensor& grad_output, const Tensor& indices, const Tensor& grad_input,
                             const PoolGeometry& g) {
  MINIDET_DISPATCH_FLOATING(grad_output.dtype(), "max_pool2d", [&] {
    max_backward<scalar_t>(grad_output.data<scalar_t>(), indices.data<int64_t>(), grad_input.data<scalar_t>(), g);
  });
}

void avg_pool2d_forward_cpu(const Tensor& input, const Tensor& output, const PoolGeometry& g) {
  MINIDET_DISPATCH_FLOATING(input.dtype(), "avg_pool2d", [&] {
    avg_forward<scalar_t>(input.data<scalar_t>(), output.data<scalar_t>(), g);
  });
}

void avg_pool2d_backward_cpu(const Tensor& grad_output, const Tensor& grad_input, const PoolGeometry& g) {
  MINIDET_DISPATCH_FLOATING(grad_output.dtype(), "avg_pool2d", [&] {
    avg_backward<scalar_t>(grad_output.data<scalar_t>(), grad_input.data<scalar_t>(), g);
  });
}

}  // namespace minidet::ops::detail
