// RotatedBoxCoder: encode / decode written with differentiable slicing and elementwise ops (math and the angle
// convention in rotated_box_coder.h).
#include "models/box_coder/rotated_box_coder.h"

#include "ops/box_iou_rotated/rotated_box_math.h"
#include "ops/common/checks.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "ops/indexing/where.h"
#include "ops/shape/shape.h"

namespace minidet::models {
namespace {

using rotated_box_math::kPi;

// A rotated box's five columns, each (...) (one dim fewer than the boxes).
struct RotatedColumns {
  Tensor cx, cy, w, h, a;
};

RotatedColumns columns_of(const Tensor& boxes) {
  return {select(boxes, -1, 0), select(boxes, -1, 1), select(boxes, -1, 2), select(boxes, -1, 3),
          select(boxes, -1, 4)};
}

// Defined, (..., 5) with `shape` spelling out what the caller expects, float32 or float64.
void check_rotated_boxes(const char* op, const Tensor& boxes, const char* arg, const char* shape) {
  ops::check_defined(op, boxes, arg);
  MINIDET_CHECK(boxes.dim() >= 1 && boxes.size(-1) == 5, op, ": expected ", arg, " of shape ", shape,
                " with 5 values (cx, cy, w, h, angle) in the last dim, got shape ", boxes.sizes());
  ops::check_floating(op, boxes, arg);
}

void check_rotated_encode_args(const char* op, const Tensor& target_boxes, const Tensor& reference_boxes) {
  check_rotated_boxes(op, target_boxes, "target_boxes", "(..., 5)");
  check_rotated_boxes(op, reference_boxes, "reference_boxes", "(..., 5)");
  ops::check_same_dtype(op, target_boxes, "target_boxes", reference_boxes, "reference_boxes");
  ops::check_same_device(op, target_boxes, "target_boxes", reference_boxes, "reference_boxes");
  MINIDET_CHECK(target_boxes.sizes() == reference_boxes.sizes(), op,
                ": expected target_boxes and reference_boxes of the same shape, got ", target_boxes.sizes(), " and ",
                reference_boxes.sizes());
}

void check_rotated_decode_args(const char* op, const Tensor& deltas, const Tensor& reference_boxes) {
  ops::check_defined(op, deltas, "deltas");
  check_rotated_boxes(op, reference_boxes, "reference_boxes", "(N, 5)");
  ops::check_dim(op, reference_boxes, "reference_boxes (N, 5)", 2);
  ops::check_floating(op, deltas, "deltas");
  MINIDET_CHECK(deltas.dim() == 2 && deltas.size(1) % 5 == 0 && deltas.size(1) > 0 &&
                    deltas.size(0) == reference_boxes.size(0),
                op, ": expected deltas of shape (N, 5K) with N = ", reference_boxes.size(0),
                " reference boxes and K >= 1, got ", deltas.sizes());
  ops::check_same_dtype(op, deltas, "deltas", reference_boxes, "reference_boxes");
  ops::check_same_device(op, deltas, "deltas", reference_boxes, "reference_boxes");
}

}  // namespace

Tensor normalize_angle(const Tensor& a) {
  ops::check_defined("normalize_angle", a, "a");
  ops::check_floating("normalize_angle", a, "a");
  // The number of half turns to take off. floor is piecewise constant and records a zero gradient, so the
  // result's gradient is a's own (1) everywhere except at the jumps, a = pi/2 + k pi.
  const Tensor half_turns = floor(div(add(a, kPi / 2), kPi));
  return sub(a, mul(half_turns, kPi));
}

double normalize_angle(double a) {
  // The tensor form's operations in the same order, each rounded (mul_rn: the product is never fused into an
  // FMA with the subtraction), so both give the same float64 bits on the CPU.
  return rotated_box_math::normalize_angle(a);
}

RotatedBoxCoder::RotatedBoxCoder(std::array<double, 5> weights, double bbox_xform_clip, OffsetFrame frame,
                                 bool edge_swap)
    : weights_(weights), bbox_xform_clip_(bbox_xform_clip), frame_(frame), edge_swap_(edge_swap) {
  for (double w : weights_)
    MINIDET_CHECK(std::isfinite(w) && w > 0, "RotatedBoxCoder: expected positive finite weights, got (",
                  weights_[0], ", ", weights_[1], ", ", weights_[2], ", ", weights_[3], ", ", weights_[4], ")");
  // Finite, unlike BoxCoder's (which only refuses NaN): an infinite clip would let exp overflow to inf sizes.
  MINIDET_CHECK(std::isfinite(bbox_xform_clip_), "RotatedBoxCoder: expected a finite bbox_xform_clip, got ",
                bbox_xform_clip_);
}

Tensor RotatedBoxCoder::encode(const Tensor& target_boxes, const Tensor& reference_boxes) const {
  check_rotated_encode_args("RotatedBoxCoder::encode", target_boxes, reference_boxes);
  const RotatedColumns g = columns_of(target_boxes), p = columns_of(reference_boxes);
  // x, y, w, h in BoxCoder's order of operations (so angle-0 boxes give its bits in the image frame); the
  // centre offset scaled by the reference's own width and height, in image axes (RRPN; detectron2's
  // Box2BoxTransformRotated) or along the reference's own axes u = (cos a, -sin a), v = (sin a, cos a).
  Tensor ox = sub(g.cx, p.cx), oy = sub(g.cy, p.cy);
  if (frame_ == OffsetFrame::kBox) {
    const Tensor c = cos(p.a), s = sin(p.a);
    const Tensor along_u = sub(mul(ox, c), mul(oy, s)), along_v = add(mul(ox, s), mul(oy, c));
    ox = along_u;
    oy = along_v;
  }
  const Tensor dx = div(mul(ox, weights_[0]), p.w);
  const Tensor dy = div(mul(oy, weights_[1]), p.h);
  // The shortest turn from P to G: a box repeats every pi, so any difference is one in [-pi/2, pi/2).
  Tensor turn = normalize_angle(sub(g.a, p.a)), gw = g.w, gh = g.h;
  if (edge_swap_) {  // or G with its sides swapped, a quarter turn further: whichever turns less
    const Tensor swap = gt(abs(turn), kPi / 4);
    turn = where(swap, normalize_angle(add(turn, kPi / 2)), turn);
    gw = where(swap, g.h, g.w);
    gh = where(swap, g.w, g.h);
  }
  const Tensor dw = mul(log(div(gw, p.w)), weights_[2]);
  const Tensor dh = mul(log(div(gh, p.h)), weights_[3]);
  const Tensor da = mul(turn, weights_[4]);
  return stack({dx, dy, dw, dh, da}, -1);
}

Tensor RotatedBoxCoder::decode(const Tensor& deltas, const Tensor& reference_boxes) const {
  check_rotated_decode_args("RotatedBoxCoder::decode", deltas, reference_boxes);
  const int64_t columns = deltas.size(1);
  // Column k of each (N, K) tensor below belongs to the k-th box of every reference box; the reference's
  // columns are (N, 1) and broadcast over k.
  const RotatedColumns r = columns_of(reference_boxes);
  const Tensor pcx = unsqueeze(r.cx, 1), pcy = unsqueeze(r.cy, 1), pw = unsqueeze(r.w, 1), ph = unsqueeze(r.h, 1),
               pa = unsqueeze(r.a, 1);
  const Tensor dx = div(slice(deltas, 1, 0, columns, 5), weights_[0]);
  const Tensor dy = div(slice(deltas, 1, 1, columns, 5), weights_[1]);
  const Tensor dw = clamp_max(div(slice(deltas, 1, 2, columns, 5), weights_[2]), bbox_xform_clip_);
  const Tensor dh = clamp_max(div(slice(deltas, 1, 3, columns, 5), weights_[3]), bbox_xform_clip_);
  const Tensor da = div(slice(deltas, 1, 4, columns, 5), weights_[4]);
  Tensor ox = mul(dx, pw), oy = mul(dy, ph);
  if (frame_ == OffsetFrame::kBox) {  // back from the reference's axes: o = ox u + oy v
    const Tensor c = cos(pa), s = sin(pa);
    const Tensor image_x = add(mul(ox, c), mul(oy, s)), image_y = sub(mul(oy, c), mul(ox, s));
    ox = image_x;
    oy = image_y;
  }
  const Tensor cx = add(ox, pcx), cy = add(oy, pcy);
  const Tensor w = mul(exp(dw), pw), h = mul(exp(dh), ph);
  // Back into the one range, whatever the prediction: a decoded box is described as every other box is.
  const Tensor a = normalize_angle(add(pa, da));
  // (N, K, 5) with the box last, then (N, 5K): box k sits at columns 5k .. 5k+4.
  return reshape(stack({cx, cy, w, h, a}, -1), {deltas.size(0), columns});
}

}  // namespace minidet::models
