// Layers: gradient checks through the modules' own parameters, CPU/CUDA parity, and a small CNN that must
// learn a toy image task.
#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "nn/nn.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/loss/cross_entropy.h"
#include "ops/reduction/reduction.h"
#include "tests/support.h"

using namespace minidet;
using namespace minidet::nn;
using autograd::TensorList;

namespace {

// gradcheck over the input and every parameter of a module (the module reads its parameters by handle, so
// gradcheck's in-place perturbations reach it).
void check_module(UnaryModule& module, const Tensor& input) {
  module.to(kFloat64);
  TensorList inputs = {input.to(kFloat64).requires_grad_()};
  for (const Tensor& p : module.parameters()) inputs.push_back(p);
  auto result = autograd::gradcheck([&](const TensorList& in) { return module.forward(in[0]); }, inputs);
  MESSAGE(module.type_name() << ": " << result.report);
  CHECK_MESSAGE(result.ok, result.report);
}

// Toy images: a bright 3x3 blob in one of four quadrants of a noisy 8x8 image; the label is the quadrant.
void quadrant_images(int64_t n, Generator& g, Tensor* images, Tensor* labels) {
  std::vector<float> pixels(n * 64);
  std::vector<int64_t> y(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < 64; ++p) pixels[i * 64 + p] = static_cast<float>(0.3 * g.next_normal());
    y[i] = g.next_int(0, 4);
    const int64_t top = (y[i] / 2) * 4 + g.next_int(0, 2), left = (y[i] % 2) * 4 + g.next_int(0, 2);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 3; ++c) pixels[i * 64 + (top + r) * 8 + left + c] += 1.0f;
  }
  *images = from_vector<float>(pixels, {n, 1, 8, 8});
  *labels = from_vector<int64_t>(y);
}

std::shared_ptr<Sequential> small_cnn(Generator& g) {
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Conv2d>(1, 8, 3, Conv2dLayerOptions().set_padding(1).set_generator(&g)));
  net->push_back(std::make_shared<BatchNorm2d>(8));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<MaxPool2d>(Pool2dOptions(2)));
  net->push_back(std::make_shared<Conv2d>(8, 16, 3, Conv2dLayerOptions().set_padding(1).set_generator(&g)));
  net->push_back(std::make_shared<ReLU>());
  net->push_back(std::make_shared<MaxPool2d>(Pool2dOptions(2)));
  net->push_back(std::make_shared<Flatten>());
  net->push_back(std::make_shared<Linear>(16 * 2 * 2, 4, true, &g));
  return net;
}

double accuracy(UnaryModule& net, const Tensor& images, const Tensor& labels) {
  NoGradGuard no_grad;
  net.eval();
  const std::vector<bool> hits = eq(argmax(net.forward(images), 1), labels).to_vector<bool>();
  net.train();
  double correct = 0;
  for (bool h : hits) correct += h;
  return correct / static_cast<double>(hits.size());
}

// Trains the small CNN with AdamW for `steps` mini-batches of 64 and returns held-out accuracy.
double train_small_cnn(const Device& device, int steps) {
  Generator g(2024);
  Tensor train_x, train_y, test_x, test_y;
  quadrant_images(1024, g, &train_x, &train_y);
  quadrant_images(256, g, &test_x, &test_y);
  auto net = small_cnn(g);
  net->to(device);
  AdamW opt({{net->parameters(), 0.01, 1e-4}});
  Tensor xs = train_x.to(device), ys = train_y.to(device);
  for (int step = 0; step < steps; ++step) {
    const int64_t start = (step * 64) % 1024;
    Tensor x, y;
    {
      NoGradGuard slicing;
      x = xs.narrow(0, start, 64);
      y = ys.narrow(0, start, 64);
    }
    opt.zero_grad();
    Tensor loss = cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
  }
  return accuracy(*net, test_x.to(device), test_y.to(device));
}

}  // namespace

TEST_CASE("gradcheck/linear_layer: input weight and bias") {
  Linear layer(5, 3);
  check_module(layer, randn({2, 4, 5}));
  Linear no_bias(4, 2, /*bias=*/false);
  check_module(no_bias, randn({3, 4}));
}

TEST_CASE("gradcheck/conv2d_layer: strided grouped convolution with bias") {
  Conv2d layer(4, 6, 3, 2, Conv2dLayerOptions().set_stride(2).set_padding(1).set_groups(2));
  check_module(layer, randn({2, 4, 5, 6}));
}

TEST_CASE("gradcheck/batch_norm2d_layer: training and eval mode") {
  BatchNorm2d train_bn(3);
  {
    NoGradGuard no_grad;
    train_bn.weight.copy_(rand({3}) + 0.5);
    train_bn.bias.copy_(randn({3}));
  }
  check_module(train_bn, randn({2, 3, 3, 4}) * 2.0 + 1.0);
  BatchNorm2d eval_bn(3);
  {
    NoGradGuard no_grad;
    eval_bn.running_mean.copy_(randn({3}));
    eval_bn.running_var.copy_(rand({3}) + 0.5);
  }
  eval_bn.eval();
  check_module(eval_bn, randn({2, 3, 3, 4}));
}

TEST_CASE("gradcheck/frozen_batch_norm2d_layer: gradient to the input only") {
  FrozenBatchNorm2d bn(3);
  {
    NoGradGuard no_grad;
    bn.weight.copy_(rand({3}) + 0.5);
    bn.running_var.copy_(rand({3}) + 0.5);
  }
  CHECK(bn.parameters().empty());  // nothing to train
  check_module(bn, randn({2, 3, 4, 4}));
}

TEST_CASE("values/batch_norm2d_layer: running statistics follow the batches") {
  BatchNorm2d bn(2, 1e-5, 0.5);
  Tensor x = from_vector<float>({1, 3, 10, 30, 5, 7, 50, 70}, {2, 2, 1, 2});  // channel 0: 1 3 5 7
  bn.forward(x);
  // channel 0: mean 4, unbiased var 20/3; running = 0.5 * old + 0.5 * batch
  CHECK(bn.running_mean.to_vector<float>()[0] == doctest::Approx(2.0));
  CHECK(bn.running_var.to_vector<float>()[0] == doctest::Approx(0.5 + 0.5 * 20.0 / 3.0));
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);
  bn.eval();
  bn.forward(x);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);  // eval mode leaves statistics alone
}

TEST_CASE("values/sequential: names the layers by index and chains them") {
  Generator g(1);
  auto net = small_cnn(g);
  CHECK(net->named_parameters()[0].first == "0.weight");
  CHECK(net->named_buffers()[0].first == "1.running_mean");
  CHECK(net->forward(randn({3, 1, 8, 8})).sizes() == Shape{3, 4});
  const std::string text = net->describe();
  INFO(text);
  CHECK(text.find("(0): Conv2d(1, 8, kernel=3x3, padding=1x1)") != std::string::npos);
}

TEST_CASE("values/small_cnn: learns the quadrant task on the CPU") {
  const double acc = train_small_cnn(Device::cpu(), 160);
  MESSAGE("small CNN held-out accuracy on CPU: " << acc);
  CHECK(acc >= 0.95);
}

MINIDET_CUDA_TEST_CASE("cuda/layers: a module on CUDA matches its CPU twin forward and backward") {
  Generator g(5);
  auto cpu_net = small_cnn(g);
  Generator g2(5);
  auto gpu_net = small_cnn(g2);
  gpu_net->to(Device::cuda());
  Tensor x = randn({6, 1, 8, 8}), up = randn({6, 4});
  Tensor y_cpu = cpu_net->forward(x), y_gpu = gpu_net->forward(x.cuda());
  CHECK(test::allclose(y_gpu, y_cpu, 1e-4, 1e-4));
  y_cpu.backward(up);
  y_gpu.backward(up.cuda());
  const auto pc = cpu_net->named_parameters(), pg = gpu_net->named_parameters();
  for (size_t i = 0; i < pc.size(); ++i) {
    CAPTURE(pc[i].first);
    CHECK(pg[i].second.device() == Device::cuda());
    CHECK(test::allclose(pg[i].second.grad(), pc[i].second.grad(), 1e-3, 1e-4));
  }
  const auto bc = cpu_net->named_buffers(), bg = gpu_net->named_buffers();
  for (size_t i = 0; i < bc.size(); ++i) CHECK(test::allclose(bg[i].second, bc[i].second, 1e-4, 1e-5));
}

MINIDET_CUDA_TEST_CASE("cuda/small_cnn: learns the quadrant task on CUDA") {
  const double acc = train_small_cnn(Device::cuda(), 160);
  MESSAGE("small CNN held-out accuracy on CUDA: " << acc);
  CHECK(acc >= 0.95);
}
