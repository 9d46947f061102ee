// DeformConv2d: a deformable convolution layer (the op and its math: ops/deform_conv2d/deform_conv2d.h)
// that predicts its own offsets, and for DCNv2 (modulated = true) its own mask, from its input.
//
//   p      = offset_conv(x)       a plain Conv2d(in, G*2*kh*kw, or G*3*kh*kw when modulated) with the same
//                                 kernel size, stride, padding and dilation, so p has the output's H_out x W_out
//   offset = p[:, :2*G*kh*kw]     (dy, dx) per offset group and tap, DESIGN.md's layout
//   mask   = sigmoid(p[:, 2*G*kh*kw:])                    (DCNv2 only, as mmcv's ModulatedDeformConv2dPack)
//   y      = deform_conv2d(x, offset, weight, bias, mask)
//
// offset_conv starts at zero (weight and bias), as in mmcv and the DCN papers, so training starts from a
// regular grid:
//   * a fresh DCNv1 layer is exactly a Conv2d with the same weight and bias;
//   * a fresh DCNv2 layer has mask = sigmoid(0) = 0.5 at every tap, so it computes 0.5 * (conv without
//     bias) + bias: half the taps' weight. The predictor learns to open or close each tap from there.
// weight and bias are initialised like Conv2d's: U(+-1/sqrt(fan_in)), fan_in = in / groups * kh * kw.
#pragma once

#include <memory>

#include "core/generator.h"
#include "nn/layers/conv2d.h"
#include "nn/module/module.h"
#include "ops/deform_conv2d/deform_conv2d.h"

namespace minidet::nn {

struct DeformConv2dLayerOptions {
  DeformConv2dOptions deform;  // stride, padding, dilation (shared with the offset predictor)
  int64_t groups = 1;
  int64_t offset_groups = 1;
  bool modulated = false;  // DCNv2: also predict a sigmoid mask per offset group and tap
  bool bias = true;
  Generator* generator = nullptr;

  DeformConv2dLayerOptions& set_stride(int64_t s) { deform.set_stride(s); return *this; }
  DeformConv2dLayerOptions& set_padding(int64_t p) { deform.set_padding(p); return *this; }
  DeformConv2dLayerOptions& set_dilation(int64_t d) { deform.set_dilation(d); return *this; }
  DeformConv2dLayerOptions& set_groups(int64_t g) { groups = g; return *this; }
  DeformConv2dLayerOptions& set_offset_groups(int64_t g) { offset_groups = g; return *this; }
  DeformConv2dLayerOptions& set_modulated(bool on) { modulated = on; return *this; }
  DeformConv2dLayerOptions& set_bias(bool on) { bias = on; return *this; }
  DeformConv2dLayerOptions& set_generator(Generator* g) { generator = g; return *this; }
};

class DeformConv2d final : public UnaryModule {
 public:
  DeformConv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, DeformConv2dLayerOptions options = {});
  DeformConv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
               DeformConv2dLayerOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Tensor weight, bias;
  std::shared_ptr<Conv2d> offset_conv;  // predicts offsets (and mask logits); zero-initialised
  DeformConv2dOptions deform_options;
  int64_t offset_groups;
  bool modulated;
};

}  // namespace minidet::nn
