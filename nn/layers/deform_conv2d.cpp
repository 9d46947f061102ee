#include "nn/layers/deform_conv2d.h"

#include "core/factories.h"
#include "nn/init/init.h"
#include "ops/common/checks.h"
#include "ops/elementwise/unary.h"
#include "ops/shape/views.h"

namespace minidet::nn {

DeformConv2d::DeformConv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                           DeformConv2dLayerOptions options)
    : DeformConv2d(in_channels, out_channels, kernel_size, kernel_size, options) {}

DeformConv2d::DeformConv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
                           DeformConv2dLayerOptions options)
    : UnaryModule("DeformConv2d"),
      deform_options(options.deform),
      offset_groups(options.offset_groups),
      modulated(options.modulated) {
  const int64_t groups = options.groups;
  MINIDET_CHECK(in_channels > 0 && out_channels > 0 && kernel_h > 0 && kernel_w > 0 && groups > 0 &&
                    offset_groups > 0,
                "DeformConv2d: channels, kernel, groups and offset_groups must be positive");
  MINIDET_CHECK(in_channels % groups == 0 && out_channels % groups == 0, "DeformConv2d: in_channels ", in_channels,
                " and out_channels ", out_channels, " must both be divisible by groups ", groups);
  MINIDET_CHECK(in_channels % offset_groups == 0, "DeformConv2d: in_channels ", in_channels,
                " must be divisible by offset_groups ", offset_groups);
  weight = register_parameter("weight", empty({out_channels, in_channels / groups, kernel_h, kernel_w}));
  if (options.bias) bias = register_parameter("bias", empty({out_channels}));
  init_conv_parameters(weight, bias, options.generator);
  // The predictor sees the same windows as the deformable conv, so its output is H_out x W_out.
  const DeformConv2dOptions& o = options.deform;
  Conv2dLayerOptions predictor;
  predictor.conv.set_stride(o.stride_h, o.stride_w)
      .set_padding(o.pad_h, o.pad_w)
      .set_dilation(o.dilation_h, o.dilation_w);
  const int64_t per_tap = modulated ? 3 : 2;  // (dy, dx) and, for DCNv2, a mask logit
  offset_conv = register_module(
      "offset_conv", std::make_shared<Conv2d>(in_channels, per_tap * offset_groups * kernel_h * kernel_w, kernel_h,
                                              kernel_w, predictor));
  init::constant_(offset_conv->weight, 0.0);
  init::constant_(offset_conv->bias, 0.0);
}

Tensor DeformConv2d::forward(const Tensor& input) {
  // Checked here so that a wrong input is reported by this layer, not by the offset predictor inside it.
  ops::check_defined("DeformConv2d", input, "input");
  ops::check_same_dtype("DeformConv2d", input, "input", weight, "weight");
  ops::check_same_device("DeformConv2d", input, "input", weight, "weight");
  const Tensor prediction = (*offset_conv)(input);
  const int64_t offset_channels = 2 * offset_groups * weight.size(2) * weight.size(3);
  if (!modulated) return deform_conv2d(input, prediction, weight, bias, Tensor(), deform_options);
  const Tensor offset = narrow(prediction, 1, 0, offset_channels);
  const Tensor mask = sigmoid(narrow(prediction, 1, offset_channels, prediction.size(1) - offset_channels));
  return deform_conv2d(input, offset, weight, bias, mask, deform_options);
}

std::string DeformConv2d::extra_repr() const {
  const DeformConv2dOptions& o = deform_options;
  const int64_t groups = offset_conv->weight.size(1) / weight.size(1);
  std::string s = std::to_string(weight.size(1) * groups) + ", " + std::to_string(weight.size(0)) +
                  ", kernel=" + std::to_string(weight.size(2)) + "x" + std::to_string(weight.size(3));
  if (o.stride_h != 1 || o.stride_w != 1)
    s += ", stride=" + std::to_string(o.stride_h) + "x" + std::to_string(o.stride_w);
  if (o.pad_h != 0 || o.pad_w != 0) s += ", padding=" + std::to_string(o.pad_h) + "x" + std::to_string(o.pad_w);
  if (o.dilation_h != 1 || o.dilation_w != 1)
    s += ", dilation=" + std::to_string(o.dilation_h) + "x" + std::to_string(o.dilation_w);
  if (groups != 1) s += ", groups=" + std::to_string(groups);
  if (offset_groups != 1) s += ", offset_groups=" + std::to_string(offset_groups);
  if (modulated) s += ", modulated";
  if (!bias.defined()) s += ", bias=false";
  return s;
}

}  // namespace minidet::nn
