// encode_boxes / decode_boxes: validation and the device switch (formulas in box_coding_kernels.h).
#include "ops/box_coding/box_coding.h"

#include <cmath>

#include "core/factories.h"
#include "core/grad_mode.h"
#include "ops/box_coding/box_coding_kernels.h"
#include "ops/boxes/box_checks.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"

namespace minidet {

void check_encode_args(const char* op, const Tensor& target_boxes, const Tensor& reference_boxes) {
  ops::detail::check_boxes(op, target_boxes, "target_boxes");
  ops::detail::check_boxes(op, reference_boxes, "reference_boxes");
  ops::check_same_dtype(op, target_boxes, "target_boxes", reference_boxes, "reference_boxes");
  ops::check_same_device(op, target_boxes, "target_boxes", reference_boxes, "reference_boxes");
  MINIDET_CHECK(target_boxes.sizes() == reference_boxes.sizes(), op,
                ": expected target_boxes and reference_boxes of the same shape, got ", target_boxes.sizes(), " and ",
                reference_boxes.sizes());
}

void check_decode_args(const char* op, const Tensor& deltas, const Tensor& reference_boxes) {
  ops::check_defined(op, deltas, "deltas");
  ops::detail::check_boxes(op, reference_boxes, "reference_boxes", "(N, 4)");
  ops::check_dim(op, reference_boxes, "reference_boxes (N, 4)", 2);
  ops::check_floating(op, deltas, "deltas");
  MINIDET_CHECK(deltas.dim() == 2 && deltas.size(1) % 4 == 0 && deltas.size(1) > 0 &&
                    deltas.size(0) == reference_boxes.size(0),
                op, ": expected deltas of shape (N, 4K) with N = ", reference_boxes.size(0),
                " reference boxes and K >= 1, got ", deltas.sizes());
  ops::check_same_dtype(op, deltas, "deltas", reference_boxes, "reference_boxes");
  ops::check_same_device(op, deltas, "deltas", reference_boxes, "reference_boxes");
}

void check_box_coding_weights(const char* op, const std::array<double, 4>& weights) {
  for (double w : weights)
    MINIDET_CHECK(std::isfinite(w) && w > 0, op, ": expected positive finite weights, got (", weights[0], ", ",
                  weights[1], ", ", weights[2], ", ", weights[3], ")");
}

namespace {

// The fused form records nothing, so it must not be reached where a gradient is wanted.
void check_no_grad(const char* op, const Tensor& a, const Tensor& b) {
  MINIDET_CHECK(!(GradMode::is_enabled() && (a.requires_grad() || b.requires_grad())), op,
                ": not differentiable, but an input requires grad (BoxCoder's encode and decode are)");
}

ops::detail::BoxCodingParams make_params(const char* op, const std::array<double, 4>& weights, double clip) {
  check_box_coding_weights(op, weights);
  MINIDET_CHECK(!std::isnan(clip), op, ": clip is NaN");
  return {{weights[0], weights[1], weights[2], weights[3]}, clip};
}

}  // namespace

Tensor encode_boxes(const Tensor& target_boxes, const Tensor& reference_boxes, const std::array<double, 4>& weights) {
  const char* op = "encode_boxes";
  check_encode_args(op, target_boxes, reference_boxes);
  check_no_grad(op, target_boxes, reference_boxes);
  const ops::detail::BoxCodingParams params = make_params(op, weights, 0.0);
  Tensor out = empty(target_boxes.sizes(), target_boxes.options());
  if (out.numel() == 0) return out;
  const Tensor target = target_boxes.contiguous(), reference = reference_boxes.contiguous();
  MINIDET_DEVICE_SWITCH(out, ops::detail::encode_boxes_cpu(target, reference, params, out),
                        ops::detail::encode_boxes_cuda(target, reference, params, out));
  return out;
}

Tensor decode_boxes(const Tensor& deltas, const Tensor& reference_boxes, const std::array<double, 4>& weights,
                    double clip) {
  const char* op = "decode_boxes";
  check_decode_args(op, deltas, reference_boxes);
  check_no_grad(op, deltas, reference_boxes);
  const ops::detail::BoxCodingParams params = make_params(op, weights, clip);
  Tensor out = empty(deltas.sizes(), deltas.options());
  if (out.numel() == 0) return out;
  const Tensor d = deltas.contiguous(), reference = reference_boxes.contiguous();
  MINIDET_DEVICE_SWITCH(out, ops::detail::decode_boxes_cpu(d, reference, params, out),
                        ops::detail::decode_boxes_cuda(d, reference, params, out));
  return out;
}

}  // namespace minidet
