#include "models/roi_heads/box_head.h"

#include "ops/common/checks.h"
#include "ops/elementwise/unary.h"
#include "ops/shape/shape.h"

namespace minidet::models {

BoxHead::BoxHead(int64_t in_features, int64_t representation_size, int64_t num_classes, Generator* generator,
                 int64_t box_dim)
    : Module("BoxHead"), in_features_(in_features), num_classes_(num_classes) {
  MINIDET_CHECK(box_dim == 4 || box_dim == 5, "BoxHead: box_dim must be 4 (axis-aligned) or 5 (rotated), got ",
                box_dim);
  MINIDET_CHECK(in_features > 0 && representation_size > 0, "BoxHead: in_features and representation_size must be ",
                "positive, got ", in_features, " and ", representation_size);
  MINIDET_CHECK(num_classes >= 1, "BoxHead: expected at least one object class, got num_classes = ", num_classes);
  fc6 = register_module("fc6", std::make_shared<nn::Linear>(in_features, representation_size, true, generator));
  fc7 = register_module("fc7", std::make_shared<nn::Linear>(representation_size, representation_size, true, generator));
  cls_score = register_module("cls_score",
                              std::make_shared<nn::Linear>(representation_size, num_classes + 1, true, generator));
  bbox_pred = register_module(
      "bbox_pred", std::make_shared<nn::Linear>(representation_size, box_dim * (num_classes + 1), true, generator));
}

BoxHeadOutput BoxHead::forward(const Tensor& pooled) {
  const auto scope = open_scope();
  ops::check_defined("BoxHead", pooled, "pooled");
  ops::check_floating("BoxHead", pooled, "pooled");
  MINIDET_CHECK(pooled.dim() >= 2 && pooled.numel() == pooled.size(0) * in_features_, "BoxHead: expected pooled ",
                "RoI features of shape (K, ...) with ", in_features_, " features per RoI, got ", pooled.sizes());
  const Tensor x = relu((*fc7)(relu((*fc6)(reshape(pooled, {pooled.size(0), in_features_})))));
  return {(*cls_score)(x), (*bbox_pred)(x)};
}

std::string BoxHead::extra_repr() const {
  return "in_features=" + std::to_string(in_features_) + ", num_classes=" + std::to_string(num_classes_);
}

}  // namespace minidet::models
