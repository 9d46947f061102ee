// GraphedFunction (nn/graphs/graphed_function.h): a function's forward and backward as CUDA graphs must give
// exactly what the eager function gives, step after step, and fall back to eager code where graphs cannot
// be right.
#include <memory>
#include <vector>

#include "autograd/engine.h"
#include "core/factories.h"
#include "nn/graphs/graphed_function.h"
#include "nn/layers/batch_norm.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/sequential.h"
#include "nn/layers/simple.h"
#include "nn/optim/adam.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "tests/support.h"

using namespace minidet;
using namespace minidet::nn;

namespace {

// conv 3x3 -> BatchNorm -> ReLU -> conv 3x3 (with bias): parameters, buffers updated in forward, and a
// backward of many kernels.
std::shared_ptr<Sequential> small_net(uint64_t seed) {
  Generator gen(seed);
  return std::make_shared<Sequential>(std::vector<std::shared_ptr<UnaryModule>>{
      std::make_shared<Conv2d>(3, 8, 3, Conv2dLayerOptions().set_padding(1).set_bias(false).set_generator(&gen)),
      std::make_shared<BatchNorm2d>(8), std::make_shared<ReLU>(),
      std::make_shared<Conv2d>(8, 4, 3, Conv2dLayerOptions().set_padding(1).set_generator(&gen))});
}

GraphedFunction graphed(const std::shared_ptr<Sequential>& net, int warmup = 2) {
  return GraphedFunction("small_net", {net}, [net](const std::vector<Tensor>& x) -> std::vector<Tensor> {
    return {net->forward(x[0])};
  }, warmup);
}

// A tensor's values on the host (parameters and losses require grad: detached first).
Tensor host(const Tensor& t) { return t.detach().cpu(); }

// A loss that weights every output element differently, so every gradient entry matters.
Tensor weighted_loss(const Tensor& y, const Tensor& weights) { return sum(mul(y, weights)); }

}  // namespace

TEST_CASE("values/graphed_function: on the CPU every call runs the function eagerly") {
  auto net = small_net(1), twin = small_net(1);
  GraphedFunction f = graphed(net);
  const Tensor x = randn({2, 3, 6, 6});
  for (int call = 0; call < 4; ++call) {
    const Tensor y = f({x})[0], expected = twin->forward(x);
    CHECK(test::allclose(y, expected, 0.0, 0.0));
  }
  CHECK(f.counts().eager == 4);
  CHECK(f.counts().captures == 0);
  CHECK(f.counts().replays == 0);
}

TEST_CASE("errors/graphed_function: a null module or function is refused") {
  CHECK_THROWS_CONTAINING(GraphedFunction("f", {nullptr}, [](const std::vector<Tensor>& x) { return x; }),
                          "a module is null");
  CHECK_THROWS_CONTAINING(GraphedFunction("f", {small_net(1)}, nullptr), "expected a function");
  CHECK_THROWS_CONTAINING(graphed(small_net(1), 0), "at least 1 warm-up call");
}

MINIDET_CUDA_TEST_CASE("cuda/graphed_function: training with AdamW matches eager training step for step") {
  // Two copies of one network, one called through graphs: 2 eager warm-up steps, a capture, then replays.
  // Losses, gradients, parameters and BatchNorm's running statistics must agree at every step: the replays
  // run the eager code's kernels on the same values.
  auto eager = small_net(7), net = small_net(7);
  eager->to(Device::cuda());
  net->to(Device::cuda());
  GraphedFunction f = graphed(net);
  AdamW eager_opt({{eager->parameters(), 0.01, 0.01}}), opt({{net->parameters(), 0.01, 0.01}});
  Generator gen(11);
  for (int step = 0; step < 6; ++step) {
    CAPTURE(step);
    const Tensor x = randn({4, 3, 8, 8}, kFloat32, &gen).cuda();
    const Tensor weights = randn({4, 4, 8, 8}, kFloat32, &gen).cuda();
    const Tensor expected = weighted_loss(eager->forward(x), weights);
    const Tensor loss = weighted_loss(f({x})[0], weights);
    CHECK(test::allclose(host(loss), host(expected), 1e-5, 1e-5));
    expected.backward();
    loss.backward();
    const std::vector<Tensor> p = net->parameters(), q = eager->parameters();
    for (size_t i = 0; i < p.size(); ++i) CHECK(test::allclose(host(p[i].grad()), host(q[i].grad()), 1e-4, 1e-5));
    opt.step();
    eager_opt.step();
    opt.zero_grad();
    eager_opt.zero_grad();
    for (size_t i = 0; i < p.size(); ++i) CHECK(test::allclose(host(p[i]), host(q[i]), 1e-4, 1e-5));
    const std::vector<Tensor> b = net->buffers(), c = eager->buffers();
    for (size_t i = 0; i < b.size(); ++i) CHECK(test::allclose(host(b[i]), host(c[i]), 1e-5, 1e-6));
  }
  CHECK(f.counts().eager == 2);
  CHECK(f.counts().captures == 1);
  CHECK(f.counts().replays == 4);
}

MINIDET_CUDA_TEST_CASE("cuda/graphed_function: an input that requires grad gets its gradient") {
  auto eager = small_net(3), net = small_net(3);
  eager->to(Device::cuda());
  net->to(Device::cuda());
  GraphedFunction f = graphed(net, 1);
  for (int step = 0; step < 3; ++step) {
    const Tensor x = randn({2, 3, 5, 5}).cuda().requires_grad_();
    const Tensor x_eager = x.detach().clone().requires_grad_();
    const Tensor weights = randn({2, 4, 5, 5}).cuda();
    weighted_loss(f({x})[0], weights).backward();
    weighted_loss(eager->forward(x_eager), weights).backward();
    REQUIRE(x.grad().defined());
    CHECK(test::allclose(host(x.grad()), host(x_eager.grad()), 1e-4, 1e-5));
  }
  CHECK(f.counts().replays == 2);
}

MINIDET_CUDA_TEST_CASE("cuda/graphed_function: gradients kept over steps accumulate as in eager code") {
  // No zero_grad: after the first replay a parameter's .grad is the graph's fixed buffer, which the next
  // replay writes; it must be copied out first, so the sum over the steps comes out right.
  auto eager = small_net(5), net = small_net(5);
  eager->to(Device::cuda());
  net->to(Device::cuda());
  GraphedFunction f = graphed(net, 1);
  for (int step = 0; step < 4; ++step) {
    const Tensor x = randn({2, 3, 5, 5}).cuda(), weights = randn({2, 4, 5, 5}).cuda();
    weighted_loss(f({x})[0], weights).backward();
    weighted_loss(eager->forward(x), weights).backward();
  }
  const std::vector<Tensor> p = net->parameters(), q = eager->parameters();
  for (size_t i = 0; i < p.size(); ++i) CHECK(test::allclose(host(p[i].grad()), host(q[i].grad()), 1e-4, 1e-5));
  CHECK(f.counts().replays == 3);
}

MINIDET_CUDA_TEST_CASE("cuda/graphed_function: a new input shape or eval mode is not replayed") {
  auto net = small_net(2);
  net->to(Device::cuda());
  GraphedFunction f = graphed(net, 1);
  const auto step = [&](const Shape& shape) {
    const Tensor x = randn(shape).cuda();
    sum(f({x})[0]).backward();
  };
  step({2, 3, 6, 6});  // warm-up
  step({2, 3, 6, 6});  // capture + replay
  CHECK(f.counts().captures == 1);
  step({3, 3, 6, 6});  // another shape: warm-up again
  CHECK(f.counts().eager == 2);
  step({3, 3, 6, 6});
  CHECK(f.counts().captures == 2);
  {
    NoGradGuard no_grad;  // inference: eager
    const Tensor y = f({randn({3, 3, 6, 6}).cuda()})[0];
    CHECK(!y.requires_grad());
  }
  CHECK(f.counts().eager == 3);
  net->eval();  // module mode is part of what was captured
  step({3, 3, 6, 6});
  CHECK(f.counts().eager == 4);
}

MINIDET_CUDA_TEST_CASE("cuda/graphed_function: a second forward before the backward runs eagerly") {
  auto eager = small_net(4), net = small_net(4);
  eager->to(Device::cuda());
  net->to(Device::cuda());
  GraphedFunction f = graphed(net, 1);
  const Tensor w = randn({2, 3, 5, 5}).cuda();
  sum(f({w})[0]).backward();  // warm-up
  sum(eager->forward(w)).backward();
  const Tensor a = randn({2, 3, 5, 5}).cuda(), b = randn({2, 3, 5, 5}).cuda();
  const Tensor ya = f({a})[0];  // replay: its backward is still to come
  const Tensor yb = f({b})[0];  // must not overwrite ya or the activations ya's backward reads
  CHECK(f.counts().eager == 2);
  add(sum(ya), sum(yb)).backward();
  add(sum(eager->forward(a)), sum(eager->forward(b))).backward();
  const std::vector<Tensor> p = net->parameters(), q = eager->parameters();
  for (size_t i = 0; i < p.size(); ++i) CHECK(test::allclose(host(p[i].grad()), host(q[i].grad()), 1e-4, 1e-5));
}

MINIDET_CUDA_TEST_CASE("cuda/graphed_function: a host copy inside the captured function is a clear error") {
  auto net = small_net(6);
  net->to(Device::cuda());
  GraphedFunction f("reads_a_value", {net}, [net](const std::vector<Tensor>& x) -> std::vector<Tensor> {
    const Tensor y = net->forward(x[0]);
    (void)host(sum(y));  // a download: cannot be captured
    return {y};
  }, 1);
  const Tensor x = randn({2, 3, 5, 5}).cuda();
  (void)f({x});  // warm-up: eager, fine
  CHECK_THROWS_CONTAINING(f({x}), "CUDA graph capture");
  // The failed capture left nothing behind: eager work on the GPU goes on.
  const Tensor y = net->forward(x);
  CHECK(host(y).defined());
}

MINIDET_CUDA_TEST_CASE("cuda/graphed_function: inference replays a forward graph of its own, and training goes on") {
  // Training steps, then inference calls (grad mode off, eval mode) between them, as an evaluation does: the
  // inference calls warm up, capture one forward graph and replay it, with the eager function's values; the
  // training graphs are neither dropped nor captured again.
  auto net = small_net(8), eager = small_net(8);
  net->to(Device::cuda());
  eager->to(Device::cuda());
  GraphedFunction f = graphed(net, 1);
  const auto train_step = [&](const Tensor& x) {
    sum(f({x})[0]).backward();
    sum(eager->forward(x)).backward();
  };
  train_step(randn({2, 3, 6, 6}).cuda());  // warm-up
  train_step(randn({2, 3, 6, 6}).cuda());  // capture + replay
  CHECK(f.counts().captures == 1);
  for (int round = 0; round < 2; ++round) {
    net->eval();
    eager->eval();
    {
      NoGradGuard no_grad;
      for (int call = 0; call < 3; ++call) {
        CAPTURE(round);
        CAPTURE(call);
        const Tensor x = randn({4, 3, 6, 6}).cuda();
        const Tensor y = f({x})[0];
        CHECK(!y.requires_grad());
        CHECK(test::allclose(host(y), host(eager->forward(x)), 0.0, 0.0));  // the same kernels on the same values
      }
    }
    net->train();
    eager->train();
    train_step(randn({2, 3, 6, 6}).cuda());
  }
  // Inference: one warm-up call, one capture, 2 + 3 replays. Training: one warm-up, one capture, 3 replays.
  CHECK(f.counts().captures == 2);
  CHECK(f.counts().eager == 2);
  CHECK(f.counts().replays == 3 + 5);
  const std::vector<Tensor> p = net->parameters(), q = eager->parameters();
  for (size_t i = 0; i < p.size(); ++i) CHECK(test::allclose(host(p[i].grad()), host(q[i].grad()), 1e-4, 1e-5));
}
