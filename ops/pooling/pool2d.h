// 2-D pooling over NCHW planes: max_pool2d, avg_pool2d, adaptive_avg_pool2d. Every (n, c) plane is pooled
// on its own; the window of output (p, q) is a rectangle of input rows [h0, h1) and columns [w0, w1).
//
// Sliding windows (max_pool2d, avg_pool2d), along each dim with kernel k, stride s, padding pad:
//   start = p*s - pad,   window = [start, start + k) clipped to the input
//   H_out = floor((H + 2*pad - k) / s) + 1,  or with ceil_mode ceil(...) + 1, minus one when that last window
//           would start at or past H + pad (it must start inside the input or the left padding; PyTorch's rule)
//   pad <= k / 2 (PyTorch's rule: a window never covers only padding).
//
// max_pool2d:  y[p, q] = max over the window of x; saves the argmax as an int64 flat index h*W + w within
//              the plane. Backward: dx[argmax(p, q)] += dy[p, q]; every other input gets nothing. NaN wins a
//              window (it propagates, as in PyTorch).
// avg_pool2d:  y[p, q] = sum over the window of x / divisor, where the divisor counts the window clipped to
//              [-pad, H + pad) when count_include_pad (PyTorch's default), else only the real input pixels.
//              Backward: every pixel of the window gets dy[p, q] / divisor.
// adaptive_avg_pool2d: output size (H_out, W_out) chosen by the caller; bin p covers rows
//              [floor(p*H/H_out), ceil((p+1)*H/H_out)) (bins may overlap by one row); y = mean over the bin.
//
// Every pool needs H >= 1 and W >= 1 (an empty plane is an error, even when padding would leave room for a
// window); N = 0 or C = 0 gives an empty output.
//
// CUDA backward passes are gathers: one thread per input pixel sums over the few output windows that
// contain it, in a fixed order, so they are deterministic without atomics.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace minidet {

struct Pool2dOptions {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 0, stride_w = 0;  // 0 means "equal to the kernel", PyTorch's default
  int64_t pad_h = 0, pad_w = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg_pool2d only

  Pool2dOptions() = default;
  explicit Pool2dOptions(int64_t kernel) : kernel_h(kernel), kernel_w(kernel) {}
  Pool2dOptions(int64_t kernel_h_, int64_t kernel_w_) : kernel_h(kernel_h_), kernel_w(kernel_w_) {}
  Pool2dOptions& set_stride(int64_t s) { return set_stride(s, s); }
  Pool2dOptions& set_stride(int64_t h, int64_t w) { stride_h = h; stride_w = w; return *this; }
  Pool2dOptions& set_padding(int64_t p) { return set_padding(p, p); }
  Pool2dOptions& set_padding(int64_t h, int64_t w) { pad_h = h; pad_w = w; return *this; }
  Pool2dOptions& set_ceil_mode(bool on) { ceil_mode = on; return *this; }
  Pool2dOptions& set_count_include_pad(bool on) { count_include_pad = on; return *this; }
};

struct MaxPool2dResult {
  Tensor output;   // (N, C, H_out, W_out), differentiable
  Tensor indices;  // (N, C, H_out, W_out) int64: flat h*W + w of each window's max within its plane
};

MaxPool2dResult max_pool2d_with_indices(const Tensor& input, const Pool2dOptions& options);
Tensor max_pool2d(const Tensor& input, const Pool2dOptions& options);
Tensor avg_pool2d(const Tensor& input, const Pool2dOptions& options);
Tensor adaptive_avg_pool2d(const Tensor& input, int64_t out_h, int64_t out_w);

}  // namespace minidet
