// DeformConv2d layer: a fresh DCNv1 layer is a Conv2d, a fresh DCNv2 layer is half of one, gradients through
// the layer and its offset predictor, use inside Sequential, CUDA parity.
#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "nn/nn.h"
#include "ops/elementwise/binary.h"
#include "tests/support.h"

using namespace minidet;
using namespace minidet::nn;
using autograd::TensorList;
using minidet::test::max_abs_diff;

namespace {

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

// A Conv2d with the same geometry, weight and bias as `layer`.
std::shared_ptr<Conv2d> matching_conv(const DeformConv2d& layer, int64_t groups) {
  const DeformConv2dOptions& o = layer.deform_options;
  Conv2dLayerOptions options;
  options.conv.set_stride(o.stride_h, o.stride_w).set_padding(o.pad_h, o.pad_w).set_dilation(o.dilation_h, o.dilation_w);
  options.conv.set_groups(groups);
  auto conv = std::make_shared<Conv2d>(layer.weight.size(1) * groups, layer.weight.size(0), layer.weight.size(2),
                                       layer.weight.size(3), options);
  conv->to(layer.weight.dtype());
  NoGradGuard raw;
  conv->weight.copy_(layer.weight);
  conv->bias.copy_(layer.bias);
  return conv;
}

}  // namespace

TEST_CASE("values/DeformConv2d: a fresh DCNv1 layer equals Conv2d with the same weights") {
  Generator g(1);
  DeformConv2d layer(6, 4, 3, DeformConv2dLayerOptions().set_padding(1).set_stride(2).set_groups(2).set_offset_groups(3).set_generator(&g));
  layer.to(kFloat64);
  auto conv = matching_conv(layer, 2);
  const Tensor x = random({2, 6, 9, 8}, kFloat64, 2).requires_grad_();
  const Tensor y = layer.forward(x);
  const Tensor expected = conv->forward(x);
  CHECK(y.sizes() == expected.sizes());
  CHECK(max_abs_diff(y, expected) <= 1e-12);
  const Tensor grad = random(y.sizes(), kFloat64, 3);
  y.backward(grad);
  const Tensor layer_grad_x = x.grad();
  x.set_grad(Tensor());
  expected.backward(grad);
  CHECK(max_abs_diff(layer_grad_x, x.grad()) <= 1e-12);
  CHECK(max_abs_diff(layer.weight.grad(), conv->weight.grad()) <= 1e-12);
  CHECK(max_abs_diff(layer.bias.grad(), conv->bias.grad()) <= 1e-12);
  // The zero predictor still learns: its gradient is not zero.
  CHECK(max_abs_diff(layer.offset_conv->weight.grad(), zeros_like(layer.offset_conv->weight)) > 0);
}

TEST_CASE("values/DeformConv2d: a fresh DCNv2 layer gives every tap half its weight") {
  Generator g(4);
  DeformConv2d layer(4, 3, 3, 2, DeformConv2dLayerOptions().set_padding(1).set_modulated(true).set_generator(&g));
  layer.to(kFloat64);
  CHECK(layer.offset_conv->weight.size(0) == 3 * 6);  // dy, dx and a mask logit per tap
  auto conv = matching_conv(layer, 1);
  const Tensor x = random({2, 4, 6, 5}, kFloat64, 5);
  NoGradGuard no_grad;
  // sigmoid(0) = 0.5 scales every column entry: y = 0.5 * (conv without bias) + bias.
  const Tensor bias = layer.bias.view({1, 3, 1, 1});
  const Tensor expected = (conv->forward(x) - bias) * 0.5 + bias;
  CHECK(max_abs_diff(layer.forward(x), expected) <= 1e-12);
}

TEST_CASE("gradcheck/DeformConv2d: input weight bias and the offset and mask predictor in float64") {
  for (bool modulated : {false, true}) {
    CAPTURE(modulated);
    Generator g(6);
    DeformConv2d layer(4, 2, 3, DeformConv2dLayerOptions().set_padding(1).set_offset_groups(2).set_modulated(modulated).set_generator(&g));
    layer.to(kFloat64);
    {
      // Move away from the zero start, where every sample sits on an integer position (a kink).
      NoGradGuard raw;
      layer.offset_conv->weight.copy_(random(layer.offset_conv->weight.sizes(), kFloat64, 7) * 0.2);
      layer.offset_conv->bias.copy_(random(layer.offset_conv->bias.sizes(), kFloat64, 8) * 0.7 + 0.5);
    }
    TensorList inputs = {random({1, 4, 5, 4}, kFloat64, 9).requires_grad_()};
    for (const Tensor& p : layer.parameters()) inputs.push_back(p);
    CHECK(inputs.size() == 5);  // input, weight, bias, offset_conv.weight, offset_conv.bias
    const auto result =
        autograd::gradcheck([&](const TensorList& in) { return layer.forward(in[0]); }, inputs);
    MESSAGE("DeformConv2d modulated=" << modulated << ": max_abs_error " << result.max_abs_error);
    CHECK_MESSAGE(result.ok, result.report);
  }
}

TEST_CASE("values/DeformConv2d: works inside Sequential and every parameter gets a gradient") {
  Generator g(10);
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Conv2d>(3, 8, 3, Conv2dLayerOptions().set_padding(1).set_generator(&g)));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<DeformConv2d>(
      8, 8, 3, DeformConv2dLayerOptions().set_padding(1).set_stride(2).set_modulated(true).set_generator(&g)));
  net->push_back(std::make_shared<ReLU>());
  const Tensor y = net->forward(random({2, 3, 8, 8}, kFloat32, 11));
  CHECK(y.sizes() == Shape{2, 8, 4, 4});
  y.backward(random(y.sizes(), kFloat32, 12));
  const NamedTensors params = net->named_parameters();
  CHECK(params.size() == 6);  // 0.weight, 0.bias, 2.weight, 2.bias, 2.offset_conv.weight, 2.offset_conv.bias
  for (const auto& [name, p] : params) {
    CAPTURE(name);
    CHECK(p.grad().defined());
  }
  CHECK(net->describe().find("DeformConv2d(8, 8, kernel=3x3, stride=2x2, padding=1x1, modulated)") != std::string::npos);
}

TEST_CASE("errors/DeformConv2d: channels not divisible by groups or offset groups") {
  CHECK_THROWS_CONTAINING(DeformConv2d(6, 4, 3, DeformConv2dLayerOptions().set_groups(4)), "divisible by groups 4");
  CHECK_THROWS_CONTAINING(DeformConv2d(6, 4, 3, DeformConv2dLayerOptions().set_offset_groups(4)),
                          "divisible by offset_groups 4");
  CHECK_THROWS_CONTAINING(DeformConv2d(6, 0, 3), "must be positive");
}

MINIDET_CUDA_TEST_CASE("cuda/DeformConv2d: a DCNv2 layer on CUDA matches the CPU") {
  Generator g(13);
  DeformConv2d layer(8, 6, 3, DeformConv2dLayerOptions().set_padding(1).set_offset_groups(2).set_modulated(true).set_generator(&g));
  {
    NoGradGuard raw;
    layer.offset_conv->weight.copy_(random(layer.offset_conv->weight.sizes(), kFloat32, 14) * 0.2);
  }
  const Tensor x = random({3, 8, 10, 9}, kFloat32, 15);
  const Tensor grad = random({3, 6, 10, 9}, kFloat32, 16);
  std::vector<Tensor> results[2];
  for (int device = 0; device < 2; ++device) {
    if (device) layer.to(Device::cuda());
    const Tensor xd = device ? x.cuda().requires_grad_() : x.clone().requires_grad_();
    const Tensor y = layer.forward(xd);
    y.backward(device ? grad.cuda() : grad);
    results[device] = {y.detach().cpu(), xd.grad().cpu()};
    for (const Tensor& p : layer.parameters()) {
      results[device].push_back(p.grad().cpu());
      p.set_grad(Tensor());
    }
  }
  for (size_t i = 0; i < results[0].size(); ++i) {
    CAPTURE(i);
    CHECK(minidet::test::allclose(results[1][i], results[0][i], 1e-4, 1e-3));
  }
}
