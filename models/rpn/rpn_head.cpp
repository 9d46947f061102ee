#include "models/rpn/rpn_head.h"

#include "nn/init/init.h"
#include "ops/common/checks.h"
#include "ops/elementwise/unary.h"
#include "ops/shape/views.h"

namespace minidet::models {

namespace {

std::shared_ptr<nn::Conv2d> make_head_conv(int64_t in, int64_t out, int64_t kernel, Generator* generator) {
  auto conv = std::make_shared<nn::Conv2d>(
      in, out, kernel, nn::Conv2dLayerOptions().set_padding(kernel / 2).set_generator(generator));
  nn::init::normal_(conv->weight, 0.0, 0.01, generator);
  nn::init::constant_(conv->bias, 0.0);
  return conv;
}

}  // namespace

RPNHead::RPNHead(int64_t in_channels, int64_t num_anchors_, Generator* generator, int64_t box_dim_)
    : Module("RPNHead"), num_anchors(num_anchors_), box_dim(box_dim_) {
  MINIDET_CHECK(in_channels > 0 && num_anchors > 0, "RPNHead: in_channels and num_anchors must be positive, got ",
                in_channels, " and ", num_anchors);
  MINIDET_CHECK(box_dim == 4 || box_dim == 5, "RPNHead: box_dim must be 4 (axis-aligned) or 5 (rotated), got ",
                box_dim);
  conv = register_module("conv", make_head_conv(in_channels, in_channels, 3, generator));
  cls_logits = register_module("cls_logits", make_head_conv(in_channels, num_anchors, 1, generator));
  bbox_pred = register_module("bbox_pred", make_head_conv(in_channels, box_dim * num_anchors, 1, generator));
}

RPNHeadOutput RPNHead::operator()(const Tensor& features) {
  const auto scope = open_scope();
  if (!forward_replaced()) return forward(features);
  const std::vector<Tensor> out = call_replacement({features}, 2);
  return {out[0], out[1]};
}

RPNHeadOutput RPNHead::forward(const Tensor& features) {
  ops::check_defined("RPNHead", features, "features");
  const int64_t in_channels = conv->weight.size(1);
  MINIDET_CHECK(features.dim() == 4 && features.size(1) == in_channels, "RPNHead: expected features of shape (N, ",
                in_channels, ", h, w), got ", features.sizes());
  const Tensor t = relu((*conv)(features));
  return {(*cls_logits)(t), (*bbox_pred)(t)};
}

std::string RPNHead::extra_repr() const {
  return "in=" + std::to_string(conv->weight.size(1)) + ", anchors=" + std::to_string(num_anchors);
}

Tensor flatten_objectness(const Tensor& objectness) {
  ops::check_defined("flatten_objectness", objectness, "objectness");
  MINIDET_CHECK(objectness.dim() == 4, "flatten_objectness: expected (N, A, h, w), got ", objectness.sizes());
  const Shape& s = objectness.sizes();
  return reshape(permute(objectness, {0, 2, 3, 1}), {s[0], s[1] * s[2] * s[3]});
}

Tensor flatten_deltas(const Tensor& deltas, int64_t box_dim) {
  ops::check_defined("flatten_deltas", deltas, "deltas");
  MINIDET_CHECK(box_dim >= 1 && deltas.dim() == 4 && deltas.size(1) % box_dim == 0, "flatten_deltas: expected (N, ",
                box_dim, "A, h, w), got ", deltas.sizes());
  const int64_t n = deltas.size(0), a = deltas.size(1) / box_dim, h = deltas.size(2), w = deltas.size(3);
  const Tensor split = reshape(deltas, {n, a, box_dim, h, w});
  return reshape(permute(split, {0, 3, 4, 1, 2}), {n, h * w * a, box_dim});
}

}  // namespace minidet::models
