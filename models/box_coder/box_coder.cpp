// BoxCoder: encode / decode written with differentiable slicing and elementwise ops (math in box_coder.h).
#include "models/box_coder/box_coder.h"

#include "core/grad_mode.h"
#include "ops/box_coding/box_coding.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/shape/shape.h"

namespace minidet::models {
namespace {

// A box as centre and size, each (..., 1) so they broadcast against (N, K) delta columns after a squeeze.
struct CenterSize {
  Tensor cx, cy, w, h;
};

// Whether a gradient must flow: then the composed form below runs and records its ops; otherwise the one-kernel
// form (ops/box_coding), which computes the same bits.
bool needs_grad(const Tensor& a, const Tensor& b) {
  return GradMode::is_enabled() && (a.requires_grad() || b.requires_grad());
}

CenterSize center_size(const Tensor& boxes) {
  CenterSize c;
  c.w = sub(select(boxes, -1, 2), select(boxes, -1, 0));
  c.h = sub(select(boxes, -1, 3), select(boxes, -1, 1));
  c.cx = add(select(boxes, -1, 0), mul(c.w, 0.5));
  c.cy = add(select(boxes, -1, 1), mul(c.h, 0.5));
  return c;
}

}  // namespace

BoxCoder::BoxCoder(std::array<double, 4> weights, double bbox_xform_clip)
    : weights_(weights), bbox_xform_clip_(bbox_xform_clip) {
  check_box_coding_weights("BoxCoder", weights_);
  MINIDET_CHECK(!std::isnan(bbox_xform_clip_), "BoxCoder: bbox_xform_clip is NaN");
}

Tensor BoxCoder::encode(const Tensor& target_boxes, const Tensor& reference_boxes) const {
  check_encode_args("BoxCoder::encode", target_boxes, reference_boxes);
  if (!needs_grad(target_boxes, reference_boxes)) return encode_boxes(target_boxes, reference_boxes, weights_);
  const CenterSize g = center_size(target_boxes), p = center_size(reference_boxes);
  // The same order of operations as torchvision's encode_boxes, so float32 targets round alike.
  const Tensor dx = div(mul(sub(g.cx, p.cx), weights_[0]), p.w);
  const Tensor dy = div(mul(sub(g.cy, p.cy), weights_[1]), p.h);
  const Tensor dw = mul(log(div(g.w, p.w)), weights_[2]);
  const Tensor dh = mul(log(div(g.h, p.h)), weights_[3]);
  return stack({dx, dy, dw, dh}, -1);
}

Tensor BoxCoder::decode(const Tensor& deltas, const Tensor& reference_boxes) const {
  check_decode_args("BoxCoder::decode", deltas, reference_boxes);
  if (!needs_grad(deltas, reference_boxes)) return decode_boxes(deltas, reference_boxes, weights_, bbox_xform_clip_);
  const int64_t columns = deltas.size(1);
  // Column k of each (N, K) tensor below belongs to the k-th box of every reference box; the reference's
  // centre and size are (N, 1) and broadcast over k.
  const CenterSize p = center_size(reference_boxes);
  const Tensor pw = unsqueeze(p.w, 1), ph = unsqueeze(p.h, 1), pcx = unsqueeze(p.cx, 1), pcy = unsqueeze(p.cy, 1);
  const Tensor dx = div(slice(deltas, 1, 0, columns, 4), weights_[0]);
  const Tensor dy = div(slice(deltas, 1, 1, columns, 4), weights_[1]);
  const Tensor dw = clamp_max(div(slice(deltas, 1, 2, columns, 4), weights_[2]), bbox_xform_clip_);
  const Tensor dh = clamp_max(div(slice(deltas, 1, 3, columns, 4), weights_[3]), bbox_xform_clip_);
  const Tensor cx = add(mul(dx, pw), pcx), cy = add(mul(dy, ph), pcy);
  const Tensor half_w = mul(mul(exp(dw), pw), 0.5), half_h = mul(mul(exp(dh), ph), 0.5);
  // (N, K, 4) with the corners last, then (N, 4K): box k's corners sit at columns 4k .. 4k+3.
  const Tensor boxes = stack({sub(cx, half_w), sub(cy, half_h), add(cx, half_w), add(cy, half_h)}, -1);
  return reshape(boxes, {deltas.size(0), columns});
}

}  // namespace minidet::models
