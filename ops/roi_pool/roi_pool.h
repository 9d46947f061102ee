// RoIPool (Fast R-CNN: Girshick 2015), with the continuous box arithmetic of MMDetection's v1 CUDA kernel (not
// torchvision's rounding). Sources: docs/references.md.
//
// Input x (N, C, H, W); rois (K, 5) rows (batch_index, x1, y1, x2, y2) in input-image pixels; output size
// (PH, PW); spatial_scale s maps image pixels to feature pixels (1/16 for a stride-16 feature map).
//
// Forward, for RoI k = (b, x1, y1, x2, y2) and every channel c:
//   feature box   X1 = x1*s,  Y1 = y1*s,  X2 = (x2 + 1)*s,  Y2 = (y2 + 1)*s       (no rounding anywhere)
//   bin size      bin_w = (X2 - X1) / PW,  bin_h = (Y2 - Y1) / PH
//   bin (p, q)    rows [floor(Y1 + p*bin_h), ceil(Y1 + (p+1)*bin_h)),
//                 cols [floor(X1 + q*bin_w), ceil(X1 + (q+1)*bin_w)),  both clipped to the map [0,H) x [0,W)
//   output        y[k, c, p, q] = max of x[b, c, h, w] over the bin
//   argmax        argmax[k, c, p, q] = h*W + w of that maximum, flat within the (b, c) plane (int64)
// Backward (to the input):  dx[b, c, argmax[k, c, p, q]] += dy[k, c, p, q]   for every bin with argmax >= 0;
//   every other pixel gets nothing. Several bins (neighbouring bins of one RoI overlap by a row or column
//   after floor/ceil; other RoIs overlap freely) may pick the same pixel, and their gradients add up.
// Backward to the rois: zero. The output depends on the coordinates only through the integer bin extents
//   (floor/ceil), so it is piecewise constant in them and its derivative is 0 wherever it exists. When
//   rois require grad they receive zeros (the true derivative, not a missing one).
//
// Conventions and edge cases (identical on CPU and CUDA, float32 and float64):
//   - The "+1" on x2 and y2 is mmdet's (and Fast R-CNN's) legacy inclusive-pixel convention: [x1, x2] covers
//     x1..x2, so at s = 1 and integer coordinates a box is x2 - x1 + 1 pixels wide (torchvision agrees
//     there; it differs when x1*s or x2*s is fractional, because it rounds them to integers first).
//   - Ties: the FIRST maximum in row-major order over the bin (smallest h, then smallest w) wins.
//   - NaN: a NaN in a bin wins it (the output is NaN, it propagates as in max_pool2d); the first NaN in
//     row-major order is the argmax.
//   - Empty bin (its clipped rows or columns are empty: the bin lies outside the map, or the RoI is
//     inverted/degenerate with X2 <= X1 or Y2 <= Y1, i.e. x2 + 1 <= x1): output 0, argmax -1, and no
//     gradient flows from it. A RoI partly outside the map pools only the pixels inside it; one fully
//     outside gives zeros. No NaN is ever produced from finite inputs.
//   - K = 0 gives a (0, C, PH, PW) output; N = 0 needs K = 0 (no valid batch index) and does the same.
//
// Validation (ops/common/roi_checks.h): input 4-D floating; rois (K, 5), same dtype and device, finite
// coordinates, integer batch indices in [0, N); output size >= 1; spatial_scale finite and > 0.
// check_roi_values = false skips the check of the rows' values and with it the op's one host
// synchronisation on CUDA, as RoIAlignOptions::check_roi_values does: only for rows the caller built and
// vouches for; a bad row may then read outside the input, as in torchvision's kernel, which checks nothing.
//
// CUDA forward: when the input is larger than the L2 cache, blocks that each copy part of the map into shared
// memory once and scan every bin that meets it there (the bins of overlapping RoIs read each pixel many
// times): in float32 16 x 16 tiles of a channel-last copy, lanes over channels, with a bin's maxima from
// several tiles merged by key (roi_pool_tiles_cuda.cu); in float64 one (H, W) plane per block when it fits.
// Otherwise one thread per bin and four channels, reading global memory.
// CUDA backward: the same plane blocks add into a shared copy of dx's plane; otherwise, by default, one
// thread per output element with atomicAdd into dx. Under DeterministicMode every element of dx gets its
// terms in the CPU's order, k, then (p, q), with no float atomics: identical bits every run, the CPU's
// (roi_pool_deterministic_cuda.cu). On planes up to about 44 x 44 a block per plane sorts its bins by argmax
// pixel (a stable counting sort) and adds each pixel's in order; on larger ones every term is keyed by its
// element of dx, written plane by plane so that a stable radix sort on the pixel's bits alone brings each
// element's terms together in order, and each element's run is added in order.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace minidet {

struct RoIPoolResult {
  Tensor output;  // (K, C, PH, PW), differentiable with respect to input
  Tensor argmax;  // (K, C, PH, PW) int64: flat h*W + w of each bin's maximum within its plane, -1 when empty
};

// output_size = {PH, PW}.
RoIPoolResult roi_pool_with_argmax(const Tensor& input, const Tensor& rois, std::array<int64_t, 2> output_size,
                                   double spatial_scale = 1.0, bool check_roi_values = true);
Tensor roi_pool(const Tensor& input, const Tensor& rois, std::array<int64_t, 2> output_size,
                double spatial_scale = 1.0, bool check_roi_values = true);

}  // namespace minidet
