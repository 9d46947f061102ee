// The kernels of deform_conv2d (math in deform_conv2d.h), on CPU and CUDA, and the bilinear sampling they
// share, compiled for both so that the two devices read the same neighbours with the same weights.
//
//   deform_im2col:  input (B, C, H, W), offset, mask -> cols (C*kh*kw rows of H_out*W_out, in a ColumnLayout)
//   deform_col2im:  grad_cols, input, offset, mask   -> grad_input, grad_offset, grad_mask, and optionally
//                   the recomputed cols (for dW), in one pass over the samples
//
// Every tensor is contiguous; the outputs are written, never accumulated into, except grad_input which
// must arrive zeroed (it is a sum over samples; CUDA's backward overwrites it, but the CPU adds into it).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/conv2d/conv2d_kernels.h"

namespace minidet::ops::detail {

// conv2d's geometry (ops/conv2d/conv2d_kernels.h) and the number of offset groups.
struct DeformGeometry : ConvGeometry {
  int64_t offset_groups;
  DeformGeometry(const ConvGeometry& conv, int64_t groups) : ConvGeometry(conv), offset_groups(groups) {}
  MINIDET_HOST_DEVICE int64_t taps() const { return kernel_h * kernel_w; }
  MINIDET_HOST_DEVICE int64_t out_hw() const { return out_h * out_w; }
  MINIDET_HOST_DEVICE int64_t channels_per_offset_group() const { return channels / offset_groups; }
};

// Where one sample lands and how it mixes its four neighbours. Neighbour r in 0..3 is (y0 + r/2, x0 + r%2)
// with weight (r/2 ? ly : 1-ly) * (r%2 ? lx : 1-lx). `valid` is false for a sample that contributes 0
// (outside [-1, H) x [-1, W), or NaN); a valid sample may still have neighbours outside the map, which
// read 0 and receive no gradient.
template <typename T>
struct DeformSample {
  bool valid;
  int64_t y0, x0;
  T ly, lx;
};

// The sample of tap (i, j) at output (p, q) with offsets (dy, dx): y = p*stride_h - pad_h + i*dilation_h + dy.
template <typename T>
MINIDET_HOST_DEVICE inline DeformSample<T> locate_sample(const DeformGeometry& g, int64_t i, int64_t j,
                                                         int64_t p, int64_t q, T dy, T dx) {
  const T y = static_cast<T>(p * g.stride_h - g.pad_h + i * g.dilation_h) + dy;
  const T x = static_cast<T>(q * g.stride_w - g.pad_w + j * g.dilation_w) + dx;
  DeformSample<T> s{};
  // Written so that NaN compares false and lands in "not valid". y = -1 (or x = -1) exactly is valid: its
  // value is 0 anyway (the neighbours above it lie outside), but its derivative from the right is not, and
  // zero offsets put every border tap of a padded conv there (torchvision takes the same derivative).
  s.valid = y >= T(-1) && y < static_cast<T>(g.height) && x >= T(-1) && x < static_cast<T>(g.width);
  if (!s.valid) return s;
  const T y_floor = std::floor(y), x_floor = std::floor(x);
  s.y0 = static_cast<int64_t>(y_floor);
  s.x0 = static_cast<int64_t>(x_floor);
  s.ly = y - y_floor;
  s.lx = x - x_floor;
  return s;
}

MINIDET_HOST_DEVICE inline bool neighbour_inside(int64_t y, int64_t x, int64_t height, int64_t width) {
  return y >= 0 && y < height && x >= 0 && x < width;
}

// The four neighbours of a valid sample in one channel plane (0 outside the map): v[r] for r as above.
template <typename T>
MINIDET_HOST_DEVICE inline void read_neighbours(const T* plane, const DeformSample<T>& s, int64_t height,
                                                int64_t width, T v[4]) {
  for (int r = 0; r < 4; ++r) {
    const int64_t y = s.y0 + r / 2, x = s.x0 + r % 2;
    v[r] = neighbour_inside(y, x, height, width) ? plane[y * width + x] : T(0);
  }
}

template <typename T>
MINIDET_HOST_DEVICE inline T neighbour_weight(const DeformSample<T>& s, int r) {
  return (r / 2 ? s.ly : T(1) - s.ly) * (r % 2 ? s.lx : T(1) - s.lx);
}

// S = sum_r weight_r v_r, and its derivatives along y and x (the weights are bilinear in ly, lx).
template <typename T>
MINIDET_HOST_DEVICE inline T interpolate(const DeformSample<T>& s, const T v[4]) {
  return (T(1) - s.ly) * ((T(1) - s.lx) * v[0] + s.lx * v[1]) + s.ly * ((T(1) - s.lx) * v[2] + s.lx * v[3]);
}
template <typename T>
MINIDET_HOST_DEVICE inline T interpolate_dy(const DeformSample<T>& s, const T v[4]) {
  return (T(1) - s.lx) * (v[2] - v[0]) + s.lx * (v[3] - v[1]);
}
template <typename T>
MINIDET_HOST_DEVICE inline T interpolate_dx(const DeformSample<T>& s, const T v[4]) {
  return (T(1) - s.ly) * (v[1] - v[0]) + s.ly * (v[3] - v[2]);
}

// Where column entry (image b, row = c*kh*kw + k, output position pos) of a chunk of B images lives in a
// column buffer: b*image_stride + row*row_stride + pos.
//   per_image  (B, rows, out_hw): one matrix per image; the forward GEMM reads it.
//   rows_first (rows, B, out_hw): the whole chunk as one (rows, B*out_hw) matrix, the backward's: with dY
//              copied once to (C_out, B*out_hw), dcols = W^T dY and dW = dY cols^T are each one GEMM per
//              group for the chunk, and dcols and the recomputed cols share one layout.
struct ColumnLayout {
  int64_t image_stride, row_stride;
  static ColumnLayout per_image(const DeformGeometry& g) { return {g.column_rows() * g.out_hw(), g.out_hw()}; }
  static ColumnLayout rows_first(const DeformGeometry& g, int64_t images) { return {g.out_hw(), images * g.out_hw()}; }
  MINIDET_HOST_DEVICE int64_t index(int64_t b, int64_t row, int64_t pos) const {
    return b * image_stride + row * row_stride + pos;
  }
};

// What deform_col2im writes; an undefined tensor is skipped. grad_input must be zeroed by the caller (the
// CPU adds into it; CUDA writes it whole).
struct DeformBackwardOutputs {
  Tensor grad_input;   // (B, C, H, W)
  Tensor grad_offset;  // (B, 2*G*kh*kw, H_out, W_out)
  Tensor grad_mask;    // (B, G*kh*kw, H_out, W_out); only with a mask
  Tensor cols;         // the forward columns again, for dW, in the layout of grad_cols
};

// mask may be undefined (DCNv1: every mask value is 1).
// im2col writes cols in `layout`; col2im reads grad_cols, and writes out.cols, in `layout`.
void deform_im2col_cpu(const Tensor& input, const Tensor& offset, const Tensor& mask, const Tensor& cols,
                       const ColumnLayout& layout, const DeformGeometry& g);
void deform_col2im_cpu(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                       const ColumnLayout& layout, const DeformGeometry& g, const DeformBackwardOutputs& out);
#if MINIDET_WITH_CUDA
void deform_im2col_cuda(const Tensor& input, const Tensor& offset, const Tensor& mask, const Tensor& cols,
                        const ColumnLayout& layout, const DeformGeometry& g);
// grad_input by atomicAdd, or by the sorted fixed-order gather when `deterministic`.
void deform_col2im_cuda(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                        const ColumnLayout& layout, const DeformGeometry& g, const DeformBackwardOutputs& out,
                        bool deterministic);
#endif

}  // namespace minidet::ops::detail
