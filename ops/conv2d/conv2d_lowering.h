// What every im2col convolution shares (conv2d and deform_conv2d; the math: ops/conv2d/conv2d.h): the checks
// of its window, its geometry, the chunk size that bounds its column buffers, and its three GEMMs, over
// stored columns or (conv2d on the CPU) columns never stored. Raw, not recorded by autograd.
//
// For a chunk of B images, with columns cols (B, rows, out_hw), rows = C_in*kh*kw, whose group blocks are
// contiguous (rows/groups each), weight (C_out, C_in/groups, kh, kw), and out / grad_out (B, C_out, out_hw):
//   columns_to_output:      out_g        = W_g @ cols_g + beta * out_g
//   output_grad_to_columns: grad_cols_g  = W_g^T @ grad_out_g
// With one group, these are a single batched GEMM over the chunk, the weight broadcast over images (batch
// stride 0). With several groups, the groups are the GEMM batch, image by image.
//
// The weight gradient sums over images as well as pixels, so it takes the columns rows first,
// cols (rows, B*out_hw), and dY as dY_by_channel (C_out, B*out_hw): one GEMM with K = B*out_hw,
//   chunk_weight_grad:      dW_g = dY_by_channel_g @ cols_g^T
// The output (C_out x rows) is small and K long: on a GPU, one GEMM would run a few thread blocks along all
// of K. K is cut into S slices instead (a batched GEMM of S partial products, S from the shape alone), and a
// fixed-order sum adds them: the same bits every run.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/conv2d/conv2d.h"
#include "ops/conv2d/conv2d_kernels.h"

namespace minidet::ops::detail {

// Stride and dilation >= 1, padding >= 0, max_column_bytes > 0; errors name `op`.
void check_window(const char* op, const ConvWindow& window);
// The geometry of input (N, C, H, W) under a kernel_h x kernel_w kernel and the window, after checking that
// the dilated kernel fits the padded input (an output of at least 1 x 1).
ConvGeometry conv_geometry(const char* op, const Tensor& input, int64_t kernel_h, int64_t kernel_w,
                           const ConvWindow& window);

// Images per chunk so that one chunk's columns stay under the window's bound on `device` (max_column_bytes,
// or when it is 0 kCudaColumnBytes / kCpuColumnBytes): at least 1, at most batch.
int64_t images_per_chunk(int64_t bytes_per_image, int64_t batch, const ConvWindow& window, const Device& device);

// All tensors contiguous, same dtype and device; out and grad_cols are written in place.
void columns_to_output(const Tensor& weight, const Tensor& cols, const Tensor& out, int64_t groups, double beta);
void output_grad_to_columns(const Tensor& weight, const Tensor& grad_out, const Tensor& grad_cols, int64_t groups);
// grad_by_channel (C_out, K) and cols (rows, K) contiguous; returns dW (C_out, rows / groups), a new tensor.
Tensor chunk_weight_grad(const Tensor& grad_by_channel, const Tensor& cols, int64_t groups);
// The forward and the weight gradient with the CPU's columns that are never stored (conv2d_kernels.h): `cols`
// stands for the chunk's columns rows first, (rows, B*out_hw), image b's from column b*out_hw.
void columns_to_output(const Tensor& weight, const RowSource& cols, const Tensor& out, int64_t groups, double beta);
Tensor chunk_weight_grad(const Tensor& grad_by_channel, const RowSource& cols, int64_t rows, int64_t groups);
// The number of K slices for an (m x n) result: 1 on the CPU; on CUDA enough for about two thread blocks per
// SM, each slice at least 256 long and K divisible by the count.
int64_t weight_grad_slices(const Tensor& like, int64_t m, int64_t n, int64_t k);
// total += chunk, or total = chunk when total is still undefined (the first chunk needs no zeros).
void add_chunk(Tensor& total, const Tensor& chunk);

}  // namespace minidet::ops::detail
