// conv2d: 2-D convolution (cross-correlation, as in every deep-learning framework), lowered to GEMM.
//
//   input  x (N, C_in, H, W),   weight w (C_out, C_in/groups, kh, kw),   bias b (C_out) optional
//   H_out = floor((H + 2*pad_h - dilation_h*(kh-1) - 1) / stride_h) + 1        (same for W)
//
//   y[n, o, p, q] = b[o] + sum_{c in group(o), i < kh, j < kw}
//                   w[o, c', i, j] * x[n, c, p*stride_h - pad_h + i*dilation_h, q*stride_w - pad_w + j*dilation_w]
//   (c' = c - first channel of o's group; taps that land in the padding read 0)
//
// Lowering (im2col): for one image, gather every receptive field into a column matrix
//   cols[(c*kh + i)*kw + j, p*W_out + q] = x[c, p*stride_h - pad_h + i*dilation_h, q*stride_w - pad_w + j*dilation_w]
// of shape (C_in*kh*kw, H_out*W_out). Rows of one group are contiguous, so per group g
//   Y_g (C_out/G, H_out*W_out) = W_g (C_out/G, C_in/G*kh*kw) @ cols_g (C_in/G*kh*kw, H_out*W_out).
//
// Backward, per image and group, with dY_g the upstream gradient in the same layout as Y_g:
//   dW_g    += dY_g @ cols_g^T            (summed over images)
//   dcols_g  = W_g^T @ dY_g
//   dx       = col2im(dcols): each column entry is added back to the input pixel it was read from (taps in
//              the padding are dropped). Pixels read by several windows receive the sum of their entries.
//   db[o]    = sum over n, p, q of dY[n, o, p, q]
// The sum of dW over images is part of one GEMM: for it the columns are built rows first, every image's
// pixels side by side in each row (conv2d_lowering.h), and on CUDA its long K is cut into fixed slices.
//
// A column buffer holds C_in*kh*kw*H_out*W_out values per image, kh*kw times the input, so images are
// processed in chunks sized to keep it under Conv2dOptions::max_column_bytes. Backward recomputes the
// columns from the saved input instead of saving them from forward: saving would keep kh*kw copies of every
// layer's input alive until backward, which is the memory the chunking exists to avoid.
//
// On the CPU, cols is never stored (an implicit GEMM): the GEMM asks for its rows as it packs them, and they
// are gathered from the input into its cache-sized packing buffer, not written to memory and read back.
// Only dcols is a buffer there (the chunks bound it, and the weight gradient's K). The sums are the same as
// with stored columns, so the bits do not change.
//
// float32 and float64, CPU (minidet's packed GEMM for float32, Eigen for float64) and CUDA (cuBLAS, FP32
// without TF32). Input may be non-contiguous.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace minidet {

// The window of a convolution (stride, padding, dilation) and the bound on its column buffer, shared by
// conv2d and deform_conv2d.
struct ConvWindow {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  // Upper bound for one column buffer (forward: cols; backward: cols and dcols, each under the bound; on the
  // CPU cols is never stored, so only dcols).
  // A single image always fits in a chunk of one, even when its columns alone exceed the bound.
  // 0 (the default) takes the device's bound below.
  int64_t max_column_bytes = 0;
};

// The default bounds. On a GPU, larger chunks make fewer and fuller GEMMs, and more blocks for the column
// kernels, whose latency more blocks hide (deform_conv2d's 8 images of 64 x 64 x 64 go in one chunk of 75 MB
// instead of two; torchvision's deform_conv2d takes up to 32 images at a time). On the CPU the GEMM runs image
// by image whatever the chunk, and a buffer above glibc's mmap threshold (at most 32 MiB) is mapped afresh at
// every call, each of its pages a fault the kernel zero-fills; a chunk under it reuses the heap's memory
// (core/allocator.h's retain_freed_host_memory).
constexpr int64_t kCudaColumnBytes = int64_t(128) << 20;
constexpr int64_t kCpuColumnBytes = int64_t(16) << 20;

// ConvWindow's chainable setters, returning the options struct that derives from it.
template <typename Options>
struct ConvWindowSetters : ConvWindow {
  Options& set_stride(int64_t s) { return set_stride(s, s); }
  Options& set_stride(int64_t h, int64_t w) { stride_h = h; stride_w = w; return self(); }
  Options& set_padding(int64_t p) { return set_padding(p, p); }
  Options& set_padding(int64_t h, int64_t w) { pad_h = h; pad_w = w; return self(); }
  Options& set_dilation(int64_t d) { return set_dilation(d, d); }
  Options& set_dilation(int64_t h, int64_t w) { dilation_h = h; dilation_w = w; return self(); }
  Options& set_max_column_bytes(int64_t bytes) { max_column_bytes = bytes; return self(); }

 private:
  Options& self() { return static_cast<Options&>(*this); }
};

struct Conv2dOptions : ConvWindowSetters<Conv2dOptions> {
  int64_t groups = 1;
  Conv2dOptions& set_groups(int64_t g) { groups = g; return *this; }
};

// Differentiable w.r.t. input, weight and bias. Pass an undefined Tensor() for no bias.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dOptions& options = {});

// How many images conv2d puts in one chunk for this input and weight (for tests and benchmarks).
int64_t conv2d_chunk_size(const Tensor& input, const Tensor& weight, const Conv2dOptions& options);

}  // namespace minidet
