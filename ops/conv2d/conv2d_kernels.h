// The data movement of the im2col lowering (see conv2d.h): the columns, and col2im, on CPU and CUDA.
//
//   im2col: images (B, C, H, W) -> cols (B, C*kh*kw, H_out*W_out)       a gather: one read per entry
//   col2im: cols (B, C*kh*kw, H_out*W_out) -> images (B, C, H, W)       the adjoint: a sum per pixel
//
// On CUDA im2col writes the columns to memory before the GEMM reads them. On the CPU they are never stored: the
// GEMM asks for their rows as it packs them (an implicit GEMM), the same entries gathered into its packing
// buffer, which saves writing and reading back a buffer that outgrows the caches.
//
// im2col can also write the chunk's columns rows first, (C*kh*kw, B*H_out*W_out): image b's columns are the
// b-th block of every row. That is the layout of the weight gradient's GEMM, whose sum over images is then
// part of one long K (ops/conv2d/conv2d_lowering.h).
//
// col2im is written, never accumulated into: every input pixel receives exactly the sum of the column
// entries that im2col read from it, so the result is the gradient of that chunk of images.
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "ops/matmul/row_source.h"

namespace minidet::ops::detail {

struct ConvGeometry {
  int64_t channels, height, width;  // of one input image (all groups together)
  int64_t kernel_h, kernel_w;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int64_t out_h, out_w;
  int64_t column_rows() const { return channels * kernel_h * kernel_w; }
  int64_t column_cols() const { return out_h * out_w; }
};

enum class ColumnOrder { PerImage, RowsFirst };

// Where image b's entry (row, pixel) of the columns lives: b * image + row * row_stride + pixel.
struct ColumnStrides {
  int64_t image, row;
  static ColumnStrides of(ColumnOrder order, const ConvGeometry& g, int64_t images) {
    return order == ColumnOrder::PerImage ? ColumnStrides{g.column_rows() * g.column_cols(), g.column_cols()}
                                          : ColumnStrides{g.column_cols(), images * g.column_cols()};
  }
};

// The CPU never stores the columns: image_columns_cpu is S = the columns of images rows first, (C*kh*kw,
// B*H_out*W_out), for the GEMM to pack straight from the images (ops/matmul/row_source.h). images: contiguous
// (B, C, H, W), kept alive by the source.
std::unique_ptr<RowSource> image_columns_cpu(const Tensor& images, const ConvGeometry& g);
// images: contiguous (B, C, H, W); cols: contiguous, B*C*kh*kw*H_out*W_out elements, per image for col2im and
// in `order` for im2col. Same dtype and device.
void col2im_cpu(const Tensor& cols, const Tensor& images, const ConvGeometry& g);
#if MINIDET_WITH_CUDA
void im2col_cuda(const Tensor& images, const Tensor& cols, const ConvGeometry& g, ColumnOrder order);
void col2im_cuda(const Tensor& cols, const Tensor& images, const ConvGeometry& g);
#endif

}  // namespace minidet::ops::detail
