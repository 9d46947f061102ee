// The CPU's columns and col2im. The columns are never stored: the GEMM asks for a segment of a row at a time
// as it packs them (an implicit GEMM), and column_row makes it from the images. col2im is parallel over
// (image, channel) planes: each owns its input plane, so no two threads ever write the same element and the
// sums happen in one fixed order (deterministic).
#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>

#include "ops/common/parallel.h"
#include "ops/conv2d/conv2d_kernels.h"

namespace minidet::ops::detail {
namespace {

// Tap column j of the kernel reads x = x_out * stride_w + x_first, x_first = j * dilation_w - pad_w: the
// output columns x_out whose x falls inside the image, [begin, end) within [0, out_w). Outside them the tap
// reads the padding. column_row and col2im share it, so the adjoint drops exactly the entries the gather zeroed.
struct TapColumns {
  int64_t x_first, begin, end;
};
TapColumns tap_columns(const ConvGeometry& g, int64_t j) {
  const int64_t x_first = j * g.dilation_w - g.pad_w;
  const int64_t begin = std::min(g.out_w, x_first >= 0 ? 0 : (-x_first + g.stride_w - 1) / g.stride_w);
  const int64_t end =
      std::max(begin, std::min(g.out_w, x_first >= g.width ? 0 : (g.width - 1 - x_first) / g.stride_w + 1));
  return {x_first, begin, end};
}

// The columns' row r = (c, i, j), S(r, q) for q in [q0, q0 + count), where q = (b, y_out, x_out) runs over the
// chunk's images: the entries that im2col would write there. Output row by output row: outside the image's rows
// a run of zeros; inside, the outputs whose tap lands inside the image, [x_begin, x_end), are a branch-free
// gather (a plain copy at stride 1) between runs of padding. The runs are short (an output row is 16 to 64
// wide in the detector), so they are plain loops, not calls to memset and memmove.
template <typename T>
void column_row(const T* images, const ConvGeometry& g, int64_t r, int64_t q0, int64_t count, T* out) {
  const int64_t taps = g.kernel_h * g.kernel_w, out_hw = g.column_cols();
  const int64_t c = r / taps, i = r % taps / g.kernel_w, j = r % g.kernel_w;
  const auto [x_first, x_begin, x_end] = tap_columns(g, j);  // x_first: x of x_out = 0, maybe in the padding
  // Where q0 falls: image b, output row y_out, column `from`; the loop then steps row by row.
  int64_t b = q0 / out_hw, y_out = q0 % out_hw / g.out_w, from = q0 % g.out_w;
  for (int64_t done = 0; done < count;) {
    const int64_t to = std::min(g.out_w, from + (count - done));  // this output row's part of the segment
    T* dst = out + done;                                          // dst[x_out - from] for x_out in [from, to)
    const int64_t y = y_out * g.stride_h - g.pad_h + i * g.dilation_h;
    if (y < 0 || y >= g.height) {
      for (int64_t x = from; x < to; ++x) dst[x - from] = T(0);
    } else {
      const T* src = images + ((b * g.channels + c) * g.height + y) * g.width;  // the image row y
      const int64_t lo = std::clamp(x_begin, from, to), hi = std::clamp(x_end, lo, to);
      for (int64_t x = from; x < lo; ++x) dst[x - from] = T(0);
      if (g.stride_w == 1)
        for (int64_t x = lo; x < hi; ++x) dst[x - from] = src[x_first + x];
      else
        for (int64_t x = lo; x < hi; ++x) dst[x - from] = src[x_first + x * g.stride_w];
      for (int64_t x = hi; x < to; ++x) dst[x - from] = T(0);
    }
    done += to - from;
    from = 0;
    if (++y_out == g.out_h) {
      y_out = 0;
      ++b;
    }
  }
}

// The columns of a chunk of images as a source for the CPU's GEMM. It keeps the images alive, and reads them
// through a pointer taken when it is made (row() must not throw: row_source.h).
template <typename T>
class ImageColumns final : public RowSource {
 public:
  ImageColumns(Tensor images, const ConvGeometry& g) : images_(std::move(images)), data_(images_.data<T>()), g_(g) {}
  void row(int64_t r, int64_t q0, int64_t count, float* out) const override { make(r, q0, count, out); }
  void row(int64_t r, int64_t q0, int64_t count, double* out) const override { make(r, q0, count, out); }

 private:
  template <typename U>
  void make(int64_t r, int64_t q0, int64_t count, U* out) const {
    if constexpr (std::is_same_v<T, U>) {
      column_row(data_, g_, r, q0, count, out);
    } else {  // conv2d's GEMMs run in the images' type (validate() checks input and weight agree), so another
              // type is a bug: NaNs show it in the result, where a throw would end the GEMM's threads
      std::fill(out, out + count, std::numeric_limits<U>::quiet_NaN());
    }
  }
  Tensor images_;
  const T* data_;
  ConvGeometry g_;
};

template <typename T>
void col2im_kernel(const T* cols, T* images, int64_t batch, const ConvGeometry& g) {
  const int64_t planes = batch * g.channels;
  const int64_t taps = g.kernel_h * g.kernel_w, out_hw = g.column_cols();
#pragma omp parallel for schedule(static) if (planes * taps * out_hw > kParallelAbove)
  for (int64_t plane = 0; plane < planes; ++plane) {
    T* dst = images + plane * g.height * g.width;
    for (int64_t k = 0; k < g.height * g.width; ++k) dst[k] = T(0);
    const T* src_plane = cols + plane * taps * out_hw;
    // The adjoint of column_row, plane by plane: each tap's output columns that land inside the image
    // (tap_columns) add their entries back, the padding's entries dropped.
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const T* src = src_plane + (i * g.kernel_w + j) * out_hw;
        const auto [x_first, q_begin, q_end] = tap_columns(g, j);
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

std::unique_ptr<RowSource> image_columns_cpu(const Tensor& images, const ConvGeometry& g) {
  return MINIDET_DISPATCH_FLOATING(images.dtype(), "conv2d", [&]() -> std::unique_ptr<RowSource> {
    return std::make_unique<ImageColumns<scalar_t>>(images, g);
  });
}

void col2im_cpu(const Tensor& cols, const Tensor& images, const ConvGeometry& g) {
  MINIDET_DISPATCH_FLOATING(images.dtype(), "conv2d", [&] {
    col2im_kernel<scalar_t>(cols.data<scalar_t>(), images.data<scalar_t>(), images.size(0), g);
  });
}

}  // namespace minidet::ops::detail
