// The per-box formulas of encode_boxes and decode_boxes (box_coding.h), shared by the CPU loop and the CUDA
// kernel. Each line is one operation of BoxCoder's composed form, in its order (models/box_coder), with
// box_math's exactly rounded helpers and the elementwise ops' own exp and log, so every form agrees bit for bit.
#pragma once

#include <array>
#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/boxes/box_math.h"
#include "ops/elementwise/elementwise_functors.h"

namespace minidet::ops::detail {

// Passed to kernels by value; the scalars are converted to T once, as the composed form's scalar ops do.
struct BoxCodingParams {
  double weights[4];
  double clip;
};

template <typename T>
struct CenterSize {
  T cx, cy, w, h;
};

// w = x2 - x1, cx = x1 + w * 0.5 (the same along y).
template <typename T>
MINIDET_HOST_DEVICE inline CenterSize<T> center_size(const T* box) {
  using namespace box_math;
  CenterSize<T> c;
  c.w = sub_rn(box[2], box[0]);
  c.h = sub_rn(box[3], box[1]);
  c.cx = add_rn(box[0], mul_rn(c.w, T(0.5)));
  c.cy = add_rn(box[1], mul_rn(c.h, T(0.5)));
  return c;
}

template <typename T>
MINIDET_HOST_DEVICE inline void encode_box(const T* target, const T* reference, const BoxCodingParams& p, T* out) {
  using namespace box_math;
  const CenterSize<T> g = center_size(target), r = center_size(reference);
  out[0] = div_rn(mul_rn(sub_rn(g.cx, r.cx), T(p.weights[0])), r.w);
  out[1] = div_rn(mul_rn(sub_rn(g.cy, r.cy), T(p.weights[1])), r.h);
  out[2] = mul_rn(apply_unary(UnaryOp::Log, div_rn(g.w, r.w), 0.0, 0.0), T(p.weights[2]));
  out[3] = mul_rn(apply_unary(UnaryOp::Log, div_rn(g.h, r.h), 0.0, 0.0), T(p.weights[3]));
}

// clamp_max as the elementwise Clamp with no lower bound: a NaN stays NaN.
template <typename T>
MINIDET_HOST_DEVICE inline T clamp_max_of(T x, T high) {
  return x > high ? high : x;
}

template <typename T>
MINIDET_HOST_DEVICE inline void decode_box(const T* delta, const T* reference, const BoxCodingParams& p, T* out) {
  using namespace box_math;
  const CenterSize<T> r = center_size(reference);
  const T dx = div_rn(delta[0], T(p.weights[0])), dy = div_rn(delta[1], T(p.weights[1]));
  const T dw = clamp_max_of(div_rn(delta[2], T(p.weights[2])), T(p.clip));
  const T dh = clamp_max_of(div_rn(delta[3], T(p.weights[3])), T(p.clip));
  const T cx = add_rn(mul_rn(dx, r.w), r.cx), cy = add_rn(mul_rn(dy, r.h), r.cy);
  const T half_w = mul_rn(mul_rn(apply_unary(UnaryOp::Exp, dw, 0.0, 0.0), r.w), T(0.5));
  const T half_h = mul_rn(mul_rn(apply_unary(UnaryOp::Exp, dh, 0.0, 0.0), r.h), T(0.5));
  out[0] = sub_rn(cx, half_w);
  out[1] = sub_rn(cy, half_h);
  out[2] = add_rn(cx, half_w);
  out[3] = add_rn(cy, half_h);
}

// Contiguous tensors. encode: boxes rows of 4 (target, reference, out alike). decode: deltas and out (N, 4K),
// reference (N, 4); box k of row n reads reference n.
void encode_boxes_cpu(const Tensor& target, const Tensor& reference, const BoxCodingParams& p, const Tensor& out);
void decode_boxes_cpu(const Tensor& deltas, const Tensor& reference, const BoxCodingParams& p, const Tensor& out);
#if MINIDET_WITH_CUDA
void encode_boxes_cuda(const Tensor& target, const Tensor& reference, const BoxCodingParams& p, const Tensor& out);
void decode_boxes_cuda(const Tensor& deltas, const Tensor& reference, const BoxCodingParams& p, const Tensor& out);
#endif

}  // namespace minidet::ops::detail
