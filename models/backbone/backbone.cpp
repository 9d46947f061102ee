#include "models/backbone/backbone.h"

#include <utility>

#include "core/factories.h"
#include "nn/init/init.h"
#include "nn/layers/batch_norm.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/deform_conv2d.h"
#include "nn/layers/simple.h"
#include "ops/common/checks.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"

namespace minidet::models {

namespace {

// A conv as the backbone wants it: Kaiming-normal weights (fan_out, ReLU gain: torchvision's ResNet
// initialisation); a zero bias only in front of a frozen norm, which cannot learn one itself.
std::shared_ptr<nn::Conv2d> make_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, NormKind norm,
                                      Generator* generator) {
  const bool bias = norm == NormKind::FrozenBatchNorm;
  auto conv = std::make_shared<nn::Conv2d>(
      in, out, kernel,
      nn::Conv2dLayerOptions().set_stride(stride).set_padding(kernel / 2).set_bias(bias).set_generator(generator));
  nn::init::kaiming_normal_(conv->weight, 0.0, nn::init::FanMode::FanOut, "relu", generator);
  if (bias) nn::init::constant_(conv->bias, 0.0);
  return conv;
}

// The deformable version of make_conv (3x3, padding 1): the same initialisation for its weight; its
// offset (and mask) predictor stays at zero, as the layer makes it.
std::shared_ptr<nn::DeformConv2d> make_deformable_conv(int64_t in, int64_t out, int64_t stride,
                                                       const BlockOptions& options) {
  const bool bias = options.norm == NormKind::FrozenBatchNorm;
  auto conv = std::make_shared<nn::DeformConv2d>(in, out, 3,
                                                 nn::DeformConv2dLayerOptions()
                                                     .set_stride(stride)
                                                     .set_padding(1)
                                                     .set_bias(bias)
                                                     .set_modulated(options.modulated)
                                                     .set_generator(options.generator));
  nn::init::kaiming_normal_(conv->weight, 0.0, nn::init::FanMode::FanOut, "relu", options.generator);
  if (bias) nn::init::constant_(conv->bias, 0.0);
  return conv;
}

std::shared_ptr<nn::UnaryModule> make_norm(int64_t channels, NormKind norm) {
  if (norm == NormKind::FrozenBatchNorm) return std::make_shared<nn::FrozenBatchNorm2d>(channels);
  if (norm == NormKind::SyncBatchNorm) return std::make_shared<nn::SyncBatchNorm2d>(channels);
  return std::make_shared<nn::BatchNorm2d>(channels);
}

void check_options(const BackboneOptions& o) {
  MINIDET_CHECK(o.in_channels > 0 && o.stem_channels > 0, "Backbone: in_channels and stem_channels must be positive, got ",
                o.in_channels, " and ", o.stem_channels);
  MINIDET_CHECK(!o.widths.empty(), "Backbone: expected at least one stage (widths is empty)");
  MINIDET_CHECK(o.blocks.size() == o.widths.size() && o.strides.size() == o.widths.size(),
                "Backbone: widths, blocks and strides must have one entry per stage, got ", o.widths.size(), ", ",
                o.blocks.size(), " and ", o.strides.size());
  for (size_t i = 0; i < o.widths.size(); ++i) {
    MINIDET_CHECK(o.widths[i] > 0 && o.blocks[i] > 0, "Backbone: stage ", i + 1,
                  " needs a positive width and block count, got width ", o.widths[i], " and ", o.blocks[i], " blocks");
    MINIDET_CHECK(o.strides[i] == 1 || o.strides[i] == 2, "Backbone: stage ", i + 1, " stride must be 1 or 2, got ",
                  o.strides[i]);
  }
}

}  // namespace

const char* norm_kind_name(NormKind kind) {
  switch (kind) {
    case NormKind::FrozenBatchNorm: return "FrozenBatchNorm";
    case NormKind::SyncBatchNorm: return "SyncBatchNorm";
    default: return "BatchNorm";
  }
}

// ---- BasicBlock ---------------------------------------------------------------------------------------------

BasicBlock::BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride_, const BlockOptions& options)
    : UnaryModule("BasicBlock"), stride(stride_) {
  const NormKind norm = options.norm;
  Generator* generator = options.generator;
  if (options.deformable)
    conv1 = register_module("conv1", make_deformable_conv(in_channels, out_channels, stride, options));
  else
    conv1 = register_module("conv1", make_conv(in_channels, out_channels, 3, stride, norm, generator));
  norm1 = register_module("norm1", make_norm(out_channels, norm));
  conv2 = register_module("conv2", make_conv(out_channels, out_channels, 3, 1, norm, generator));
  norm2 = register_module("norm2", make_norm(out_channels, norm));
  if (stride != 1 || in_channels != out_channels) {
    shortcut = register_module("shortcut", std::make_shared<nn::Sequential>());
    shortcut->push_back(make_conv(in_channels, out_channels, 1, stride, norm, generator));
    shortcut->push_back(make_norm(out_channels, norm));
  }
}

Tensor BasicBlock::forward(const Tensor& input) {
  const Tensor residual = (*norm2)((*conv2)(relu((*norm1)((*conv1)(input)))));
  return relu(add(residual, shortcut ? (*shortcut)(input) : input));
}

std::string BasicBlock::extra_repr() const {
  return "stride=" + std::to_string(stride) + (shortcut ? ", projection shortcut" : "");
}

// ---- Backbone -----------------------------------------------------------------------------------------------

Backbone::Backbone(BackboneOptions options) : UnaryModule("Backbone"), options_(std::move(options)) {
  check_options(options_);
  const BackboneOptions& o = options_;
  stem = register_module("stem", std::make_shared<nn::Sequential>());
  stem->push_back(make_conv(o.in_channels, o.stem_channels, 3, 2, o.norm, o.generator));
  stem->push_back(make_norm(o.stem_channels, o.norm));
  stem->push_back(std::make_shared<nn::ReLU>());
  int64_t channels = o.stem_channels;
  for (size_t i = 0; i < o.widths.size(); ++i) {
    auto stage = register_module("stage" + std::to_string(i + 1), std::make_shared<nn::Sequential>());
    for (int64_t b = 0; b < o.blocks[i]; ++b) {
      BlockOptions block;
      block.norm = o.norm;
      block.deformable = o.deformable_last_stage && i + 1 == o.widths.size();
      block.modulated = o.modulated_deformable;
      block.generator = o.generator;
      stage->push_back(std::make_shared<BasicBlock>(channels, o.widths[i], b == 0 ? o.strides[i] : 1, block));
      channels = o.widths[i];
    }
    stages.push_back(stage);
  }
}

int64_t Backbone::stride() const {
  int64_t s = 2;
  for (int64_t stage_stride : options_.strides) s *= stage_stride;
  return s;
}

Tensor Backbone::forward(const Tensor& images) {
  ops::check_defined("Backbone", images, "images");
  MINIDET_CHECK(images.dim() == 4 && images.size(1) == options_.in_channels, "Backbone: expected images of shape (N, ",
                options_.in_channels, ", H, W), got ", images.sizes());
  ops::check_floating("Backbone", images, "images");
  Tensor x = (*stem)(images);
  for (const auto& stage : stages) x = (*stage)(x);
  return x;
}

}  // namespace minidet::models
