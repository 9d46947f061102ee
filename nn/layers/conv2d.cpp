#include "nn/layers/conv2d.h"

#include <cmath>

#include "core/factories.h"
#include "nn/init/init.h"

namespace minidet::nn {

void init_conv_parameters(const Tensor& weight, const Tensor& bias, Generator* generator) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", generator);
  if (!bias.defined()) return;
  const double bound = 1.0 / std::sqrt(static_cast<double>(init::fan_in_and_out(weight).first));
  init::uniform_(bias, -bound, bound, generator);
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv2dLayerOptions options)
    : Conv2d(in_channels, out_channels, kernel_size, kernel_size, options) {}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
               Conv2dLayerOptions options)
    : UnaryModule("Conv2d"), conv_options(options.conv) {
  const int64_t groups = options.conv.groups;
  MINIDET_CHECK(in_channels > 0 && out_channels > 0 && kernel_h > 0 && kernel_w > 0 && groups > 0,
                "Conv2d: channels, kernel and groups must be positive");
  MINIDET_CHECK(in_channels % groups == 0 && out_channels % groups == 0, "Conv2d: in_channels ", in_channels,
                " and out_channels ", out_channels, " must both be divisible by groups ", groups);
  weight = register_parameter("weight", empty({out_channels, in_channels / groups, kernel_h, kernel_w}));
  if (options.bias) bias = register_parameter("bias", empty({out_channels}));
  init_conv_parameters(weight, bias, options.generator);
}

Tensor Conv2d::forward(const Tensor& input) { return conv2d(input, weight, bias, conv_options); }

std::string Conv2d::extra_repr() const {
  const Conv2dOptions& o = conv_options;
  std::string s = std::to_string(weight.size(1) * o.groups) + ", " + std::to_string(weight.size(0)) +
                  ", kernel=" + std::to_string(weight.size(2)) + "x" + std::to_string(weight.size(3));
  if (o.stride_h != 1 || o.stride_w != 1) s += ", stride=" + std::to_string(o.stride_h) + "x" + std::to_string(o.stride_w);
  if (o.pad_h != 0 || o.pad_w != 0) s += ", padding=" + std::to_string(o.pad_h) + "x" + std::to_string(o.pad_w);
  if (o.dilation_h != 1 || o.dilation_w != 1) s += ", dilation=" + std::to_string(o.dilation_h);
  if (o.groups != 1) s += ", groups=" + std::to_string(o.groups);
  if (!bias.defined()) s += ", bias=false";
  return s;
}

}  // namespace minidet::nn
