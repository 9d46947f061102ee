// The three GEMMs of an im2col convolution and the chunk size that bounds its column buffer, shared by
// conv2d and deform_conv2d (their math: ops/conv2d/conv2d.h). Raw, not recorded by autograd.
//
// For a chunk of B images, with columns cols (B, rows, out_hw), rows = C_in*kh*kw, whose group blocks are
// contiguous (rows/groups each), weight (C_out, C_in/groups, kh, kw), and out / grad_out (B, C_out, out_hw):
//   columns_to_output:      out_g        = W_g @ cols_g + beta * out_g
//   output_grad_to_columns: grad_cols_g  = W_g^T @ grad_out_g
//   accumulate_weight_grad: grad_W_g    += sum over the B images of grad_out_g @ cols_g^T
// With one group, the first two are a single batched GEMM over the chunk, the weight broadcast over images
// (batch stride 0). With several groups, the groups are the GEMM batch, image by image.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace minidet::ops::detail {

// Images per chunk so that one chunk's columns stay under max_column_bytes (at least 1, at most batch).
int64_t images_per_chunk(int64_t bytes_per_image, int64_t batch, int64_t max_column_bytes);

// All tensors contiguous, same dtype and device; out, grad_cols and grad_weight are written in place.
void columns_to_output(const Tensor& weight, const Tensor& cols, const Tensor& out, int64_t groups, double beta);
void output_grad_to_columns(const Tensor& weight, const Tensor& grad_out, const Tensor& grad_cols, int64_t groups);
void accumulate_weight_grad(const Tensor& grad_out, const Tensor& cols, const Tensor& grad_weight, int64_t groups);

}  // namespace minidet::ops::detail
