// Conv2d: a 2-D convolution layer over NCHW input (the op and its math: ops/conv2d/conv2d.h).
// weight (out, in / groups, kh, kw), bias (out). Initialised like PyTorch: U(+-1/sqrt(fan_in)) for both,
// fan_in = in / groups * kh * kw.
#pragma once

#include "core/generator.h"
#include "nn/module/module.h"
#include "ops/conv2d/conv2d.h"

namespace minidet::nn {

struct Conv2dLayerOptions {
  Conv2dOptions conv;  // stride, padding, dilation, groups
  bool bias = true;
  Generator* generator = nullptr;

  Conv2dLayerOptions& set_stride(int64_t s) { conv.set_stride(s); return *this; }
  Conv2dLayerOptions& set_padding(int64_t p) { conv.set_padding(p); return *this; }
  Conv2dLayerOptions& set_dilation(int64_t d) { conv.set_dilation(d); return *this; }
  Conv2dLayerOptions& set_groups(int64_t g) { conv.set_groups(g); return *this; }
  Conv2dLayerOptions& set_bias(bool on) { bias = on; return *this; }
  Conv2dLayerOptions& set_generator(Generator* g) { generator = g; return *this; }
};

// PyTorch's initialisation of a convolution layer: weight kaiming_uniform(a = sqrt(5)), i.e.
// U(+-1/sqrt(fan_in)), then bias (when defined) U(+-1/sqrt(fan_in)). Shared with DeformConv2d.
void init_conv_parameters(const Tensor& weight, const Tensor& bias, Generator* generator);

class Conv2d final : public UnaryModule {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv2dLayerOptions options = {});
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
         Conv2dLayerOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Tensor weight, bias;
  Conv2dOptions conv_options;
};

}  // namespace minidet::nn
