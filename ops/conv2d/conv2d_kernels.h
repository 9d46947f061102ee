// The two data-movement kernels of the im2col lowering (see conv2d.h), on CPU and CUDA.
//
//   im2col: images (B, C, H, W) -> cols (B, C*kh*kw, H_out*W_out)       a gather: one read per entry
//   col2im: cols (B, C*kh*kw, H_out*W_out) -> images (B, C, H, W)       the adjoint: a sum per pixel
//
// col2im is written, never accumulated into: every input pixel receives exactly the sum of the column
// entries that im2col read from it, so the result is the gradient of that chunk of images.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace minidet::ops::detail {

struct ConvGeometry {
  int64_t channels, height, width;  // of one input image (all groups together)
  int64_t kernel_h, kernel_w;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int64_t out_h, out_w;
  int64_t column_rows() const { return channels * kernel_h * kernel_w; }
  int64_t column_cols() const { return out_h * out_w; }
};

// images: contiguous (B, C, H, W); cols: contiguous (B, C*kh*kw, H_out*W_out). Same dtype and device.
void im2col_cpu(const Tensor& images, const Tensor& cols, const ConvGeometry& g);
void col2im_cpu(const Tensor& cols, const Tensor& images, const ConvGeometry& g);
#if MINIDET_WITH_CUDA
void im2col_cuda(const Tensor& images, const Tensor& cols, const ConvGeometry& g);
void col2im_cuda(const Tensor& cols, const Tensor& images, const ConvGeometry& g);
#endif

}  // namespace minidet::ops::detail
