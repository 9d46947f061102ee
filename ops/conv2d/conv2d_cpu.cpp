// CPU im2col / col2im. Both are parallel over (image, channel) planes: im2col writes the kh*kw column rows
// of its plane, col2im owns its input plane, so no two threads ever write the same element and the sums in
// col2im happen in one fixed order (deterministic).
#include <algorithm>

#include "ops/common/parallel.h"
#include "ops/conv2d/conv2d_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
void im2col_kernel(const T* images, T* cols, int64_t batch, const ConvGeometry& g, ColumnStrides strides) {
  const int64_t planes = batch * g.channels;
  const int64_t taps = g.kernel_h * g.kernel_w, out_hw = g.column_cols();
#pragma omp parallel for schedule(static) if (planes * taps * out_hw > kParallelAbove)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T* src = images + plane * g.height * g.width;
    // plane = b*C + c; image b's rows of channel c are (c*kh + i)*kw + j.
    const int64_t b = plane / g.channels, c = plane % g.channels;
    T* dst_plane = cols + b * strides.image + c * taps * strides.row;
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        T* dst = dst_plane + (i * g.kernel_w + j) * strides.row;
        // The outputs q whose x = q*stride_w - pad_w + j*dilation_w falls inside the image: [q_begin, q_end).
        // Outside them the row is padding (zeros); inside, a branch-free gather (a plain copy at stride 1).
        const int64_t x_first = j * g.dilation_w - g.pad_w;  // x of q = 0
        const int64_t q_begin = std::min(g.out_w, x_first >= 0 ? 0 : (-x_first + g.stride_w - 1) / g.stride_w);
        const int64_t q_end =
            std::max(q_begin, std::min(g.out_w, x_first >= g.width ? 0 : (g.width - 1 - x_first) / g.stride_w + 1));
        for (int64_t p = 0; p < g.out_h; ++p) {
          const int64_t y = p * g.stride_h - g.pad_h + i * g.dilation_h;
          T* out = dst + p * g.out_w;
          if (y < 0 || y >= g.height) {
            std::fill(out, out + g.out_w, T(0));
            continue;
          }
          const int64_t row = y * g.width + x_first;  // src index of q = 0 (itself maybe in the padding)
          std::fill(out, out + q_begin, T(0));
          for (int64_t q = q_begin; q < q_end; ++q) out[q] = src[row + q * g.stride_w];
          std::fill(out + q_end, out + g.out_w, T(0));
        }
      }
    }
  }
}

template <typename T>
void col2im_kernel(const T* cols, T* images, int64_t batch, const ConvGeometry& g) {
  const int64_t planes = batch * g.channels;
  const int64_t taps = g.kernel_h * g.kernel_w, out_hw = g.column_cols();
#pragma omp parallel for schedule(static) if (planes * taps * out_hw > kParallelAbove)
  for (int64_t plane = 0; plane < planes; ++plane) {
    T* dst = images + plane * g.height * g.width;
    for (int64_t k = 0; k < g.height * g.width; ++k) dst[k] = T(0);
    const T* src_plane = cols + plane * taps * out_hw;
    // The exact mirror of im2col's loops, with the assignment turned into +=: the same range [q_begin, q_end)
    // of outputs whose tap lands inside the image, the padding's entries dropped.
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const T* src = src_plane + (i * g.kernel_w + j) * out_hw;
        const int64_t x_first = j * g.dilation_w - g.pad_w;  // x of q = 0
        const int64_t q_begin = std::min(g.out_w, x_first >= 0 ? 0 : (-x_first + g.stride_w - 1) / g.stride_w);
        const int64_t q_end =
            std::max(q_begin, std::min(g.out_w, x_first >= g.width ? 0 : (g.width - 1 - x_first) / g.stride_w + 1));
        for (int64_t p = 0; p < g.out_h; ++p) {
          const int64_t y = p * g.stride_h - g.pad_h + i * g.dilation_h;
          if (y < 0 || y >= g.height) continue;
          const int64_t row = y * g.width + x_first;  // dst index of q = 0 (itself maybe in the padding)
          const T* from = src + p * g.out_w;
          for (int64_t q = q_begin; q < q_end; ++q) dst[row + q * g.stride_w] += from[q];
        }
      }
    }
  }
}

}  // namespace

void im2col_cpu(const Tensor& images, const Tensor& cols, const ConvGeometry& g, ColumnOrder order) {
  const ColumnStrides strides = ColumnStrides::of(order, g, images.size(0));
  MINIDET_DISPATCH_FLOATING(images.dtype(), "conv2d", [&] {
    im2col_kernel<scalar_t>(images.data<scalar_t>(), cols.data<scalar_t>(), images.size(0), g, strides);
  });
}

void col2im_cpu(const Tensor& cols, const Tensor& images, const ConvGeometry& g) {
  MINIDET_DISPATCH_FLOATING(images.dtype(), "conv2d", [&] {
    col2im_kernel<scalar_t>(cols.data<scalar_t>(), images.data<scalar_t>(), images.size(0), g);
  });
}

}  // namespace minidet::ops::detail
