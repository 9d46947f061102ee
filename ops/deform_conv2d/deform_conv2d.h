// deform_conv2d: deformable convolution, DCNv1 (offsets; Dai et al. 2017) and DCNv2 (offsets and a modulation
// mask; Zhu et al. 2019). Sources: docs/references.md.
//
//   input x (N, C_in, H, W)            weight w (C_out, C_in/groups, kh, kw)       bias b (C_out) optional
//   offset (N, 2*G*kh*kw, H_out, W_out)       mask m (N, G*kh*kw, H_out, W_out) optional (DCNv2)
//   H_out = floor((H + 2*pad_h - dilation_h*(kh-1) - 1) / stride_h) + 1         (same for W)
//
// groups = C_in / w.size(1) and the offset groups G = offset.size(1) / (2*kh*kw) are read from the shapes.
// The channels of x are split into G contiguous blocks; block g moves its kernel taps with its own offsets.
// Offset layout (DESIGN.md): for offset group g and tap k = i*kw + j, channel g*2*kh*kw + 2k holds dy and
// channel g*2*kh*kw + 2k + 1 holds dx. Mask channel g*kh*kw + k scales that tap's sample.
//
// Forward. Tap (i, j) of output position (p, q) reads input channel c (offset group g = c / (C_in/G)) at
//   y = p*stride_h - pad_h + i*dilation_h + dy[n, g, k, p, q]      x = q*stride_w - pad_w + j*dilation_w + dx
// by bilinear interpolation between its four neighbours (y0, x0), (y0, x0+1), (y0+1, x0), (y0+1, x0+1),
// y0 = floor(y), x0 = floor(x), ly = y - y0, lx = x - x0:
//   S(x_c; y, x) = (1-ly)(1-lx) v00 + (1-ly) lx v01 + ly (1-lx) v10 + ly lx v11
// where a neighbour outside the map reads 0, and a sample with y < -1, y >= H, x < -1 or x >= W (or not
// finite) is 0 altogether: the interpolation fades to zero over the one pixel around the border, so S is
// continuous in (y, x) everywhere (at y = -1 or x = -1 the formula gives 0 by itself). Then, as in conv2d
// (ops/conv2d/conv2d.h), with im2col columns
//   cols[n, c*kh*kw + k, p*W_out + q] = m[n, g, k, p, q] * S(x[n, c]; y, x)          (m = 1 without mask)
//   Y_g = W_g @ cols_g per group, plus bias.
//
// Backward, with dY the upstream gradient and dcols = W_g^T @ dY_g per group (the same GEMM as conv2d):
//   dW_g += dY_g @ cols_g^T          cols recomputed from the saved input, offsets and mask
//   db    = sum of dY over n, p, q
//   dx    (col2im): every sample sends m * dcols * (its bilinear weight) to each of its four neighbours
//   dm[n, g, k, p, q]  = sum over c in group g of dcols[c, k, p, q] * S(x_c; y, x)
//   ddy[n, g, k, p, q] = m * sum over c in g of dcols[c, k, p, q] * dS/dy,
//       dS/dy = (1-lx)(v10 - v00) + lx (v11 - v01)        dS/dx = (1-ly)(v01 - v00) + ly (v11 - v10)
//   (col2im_coord). At integer y or x, S has a kink and the derivative is the one-sided one from the right,
//   at the border y = -1 or x = -1 too (where zero offsets put the border taps of a padded conv): the same
//   derivative as torchvision.ops.deform_conv2d, so a zero-initialised offset conv gets the same gradient.
//
// Design (how the kernels use the math):
// - The four neighbours, weights and validity of a sample depend on (n, g, k, p, q) but not on the channel,
//   so every kernel computes them once per (image, offset group, tap, position) and loops over the C_in/G
//   channels of the group. mmcv and torchvision recompute them per channel.
// - Backward is one fused pass per sample: it reads the four neighbours of each channel once and from them
//   produces dx (col2im), ddy, ddx and dm (col2im_coord) and, when dW is needed, the recomputed column
//   entry. mmcv runs col2im, col2im_coord (twice, once per coordinate) and im2col as three kernels.
// - dx is a scatter. On CUDA the lanes of a warp take the CHANNELS of one sample, in an NHWC copy of the
//   input and an NHWC gradient buffer, so a warp's neighbour reads and atomicAdds each cover consecutive
//   words of one pixel instead of 32 scattered pixels (deform_conv2d_backward_cuda.cu). Under
//   DeterministicMode it instead lists (neighbour pixel, sample) pairs, sorts them by pixel with a stable
//   radix sort and lets a team of lanes per pixel sum its list in that fixed order: the same bits every run
//   (deform_conv2d_deterministic_cuda.cu). The CPU runs dx as its own pass, one thread per input plane, so
//   it never races and always sums in one order.
// - Images go in chunks whose column buffer stays under max_column_bytes, as in conv2d, and backward
//   recomputes the columns instead of saving them. The forward GEMM is conv2d's
//   (ops/conv2d/conv2d_lowering.h); the backward lays dcols and the recomputed columns out rows first,
//   (rows, B*out_hw), so that dcols = W^T dY and dW = dY cols^T are each one GEMM per group for a whole
//   chunk instead of one per image.
//
// float32 and float64, CPU (Eigen) and CUDA (cuBLAS, FP32 without TF32). Inputs may be non-contiguous.
// A batch of 0 gives an empty (0, C_out, H_out, W_out) output and zero gradients.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/conv2d/conv2d.h"

namespace minidet {

// stride, padding, dilation and max_column_bytes, with conv2d's meaning and setters (ops/conv2d/conv2d.h).
// groups and offset groups are not options: they are read from the shapes.
struct DeformConv2dOptions : ConvWindowSetters<DeformConv2dOptions> {};

// Differentiable w.r.t. input, offset, weight, bias and mask. Pass an undefined Tensor() for no bias and
// for no mask (DCNv1).
Tensor deform_conv2d(const Tensor& input, const Tensor& offset, const Tensor& weight, const Tensor& bias = Tensor(),
                     const Tensor& mask = Tensor(), const DeformConv2dOptions& options = {});

// How many images deform_conv2d puts in one chunk (for tests and benchmarks).
int64_t deform_conv2d_chunk_size(const Tensor& input, const Tensor& offset, const Tensor& weight,
                                 const DeformConv2dOptions& options);

}  // namespace minidet
