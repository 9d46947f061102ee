// Pooling geometry, the window arithmetic shared by the CPU and CUDA kernels (so both have exactly the
// same semantics), and the kernel entry points. Tensors passed to kernels are contiguous (planes, H, W).
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/pooling/pool2d.h"

namespace minidet::ops::detail {

struct PoolGeometry {
  int64_t planes = 0, height = 0, width = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool count_include_pad = true;
  bool adaptive = false;  // adaptive_avg_pool2d bins instead of sliding windows
};

// Validates input (N, C, H, W) and options for `op`, and returns the geometry (PyTorch's output size rule).
PoolGeometry make_pool_geometry(const char* op, const Tensor& input, const Pool2dOptions& options);

// Outputs o along one dim whose sliding window [o*s - pad, o*s - pad + k) contains input index i:
// o*s <= i + pad and o*s > i + pad - k, intersected with [0, out).
MINIDET_HOST_DEVICE inline void sliding_outputs_containing(int64_t i, int64_t k, int64_t s, int64_t pad,
                                                           int64_t out, int64_t* lo, int64_t* hi) {
  const int64_t top = i + pad, bottom = i + pad - k + 1;
  *lo = bottom <= 0 ? 0 : (bottom + s - 1) / s;
  *hi = top / s + 1 < out ? top / s + 1 : out;
}

MINIDET_HOST_DEVICE inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
MINIDET_HOST_DEVICE inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

// Adaptive bins containing input index i: bin floor(i*out/in) is the first (every earlier bin ends at or
// before i), and later bins contain i while they start at or before i (their ends only grow).
MINIDET_HOST_DEVICE inline void adaptive_outputs_containing(int64_t i, int64_t in, int64_t out, int64_t* lo,
                                                            int64_t* hi) {
  *lo = (i * out) / in;
  int64_t o = *lo;
  while (o < out && adaptive_start(o, in, out) <= i) ++o;
  *hi = o;
}

// The clipped window of output (p, q) and what its sum is divided by (see pool2d.h).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};

MINIDET_HOST_DEVICE inline AvgWindow avg_window(const PoolGeometry& g, int64_t p, int64_t q) {
  AvgWindow w;
  if (g.adaptive) {
    w.h0 = adaptive_start(p, g.height, g.out_h);
    w.h1 = adaptive_end(p, g.height, g.out_h);
    w.w0 = adaptive_start(q, g.width, g.out_w);
    w.w1 = adaptive_end(q, g.width, g.out_w);
    w.divisor = (w.h1 - w.h0) * (w.w1 - w.w0);
    return w;
  }
  w.h0 = p * g.stride_h - g.pad_h;
  w.w0 = q * g.stride_w - g.pad_w;
  // First clip to the padded input: that size is the count_include_pad divisor.
  w.h1 = w.h0 + g.kernel_h < g.height + g.pad_h ? w.h0 + g.kernel_h : g.height + g.pad_h;
  w.w1 = w.w0 + g.kernel_w < g.width + g.pad_w ? w.w0 + g.kernel_w : g.width + g.pad_w;
  const int64_t padded_count = (w.h1 - w.h0) * (w.w1 - w.w0);
  w.h0 = w.h0 > 0 ? w.h0 : 0;
  w.w0 = w.w0 > 0 ? w.w0 : 0;
  w.h1 = w.h1 < g.height ? w.h1 : g.height;
  w.w1 = w.w1 < g.width ? w.w1 : g.width;
  w.divisor = g.count_include_pad ? padded_count : (w.h1 - w.h0) * (w.w1 - w.w0);
  return w;
}

// The range of outputs (rows [p0, p1), columns [q0, q1)) whose avg window contains input pixel (y, x).
MINIDET_HOST_DEVICE inline void avg_outputs_containing(const PoolGeometry& g, int64_t y, int64_t x, int64_t* p0,
                                                       int64_t* p1, int64_t* q0, int64_t* q1) {
  if (g.adaptive) {
    adaptive_outputs_containing(y, g.height, g.out_h, p0, p1);
    adaptive_outputs_containing(x, g.width, g.out_w, q0, q1);
  } else {
    sliding_outputs_containing(y, g.kernel_h, g.stride_h, g.pad_h, g.out_h, p0, p1);
    sliding_outputs_containing(x, g.kernel_w, g.stride_w, g.pad_w, g.out_w, q0, q1);
  }
}

void max_pool2d_forward_cpu(const Tensor& input, const Tensor& output, const Tensor& indices, const PoolGeometry& g);
void max_pool2d_backward_cpu(const Tensor& grad_output, const Tensor& indices, const Tensor& grad_input,
                             const PoolGeometry& g);
void avg_pool2d_forward_cpu(const Tensor& input, const Tensor& output, const PoolGeometry& g);
void avg_pool2d_backward_cpu(const Tensor& grad_output, const Tensor& grad_input, const PoolGeometry& g);
#if MINIDET_WITH_CUDA
void max_pool2d_forward_cuda(const Tensor& input, const Tensor& output, const Tensor& indices,
                             const PoolGeometry& g);
void max_pool2d_backward_cuda(const Tensor& grad_output, const Tensor& indices, const Tensor& grad_input,
                              const PoolGeometry& g);
void avg_pool2d_forward_cuda(const Tensor& input, const Tensor& output, const PoolGeometry& g);
void avg_pool2d_backward_cuda(const Tensor& grad_output, const Tensor& grad_input, const PoolGeometry& g);
#endif

}  // namespace minidet::ops::detail
