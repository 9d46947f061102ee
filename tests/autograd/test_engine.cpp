// The autograd engine: graph shapes, gradient accumulation, retain_graph, hooks, grad mode, saved-tensor
// version checks, long chains and freeing the graph.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "autograd/anomaly.h"
#include "autograd/dot.h"
#include "autograd/engine.h"
#include "autograd/trace.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/reduction/reduction.h"
#include "tests/support.h"

using namespace minidet;

namespace {
Tensor leaf(std::vector<double> values) {
  Tensor t = from_vector<double>(values);
  t.requires_grad_();
  return t;
}
std::vector<double> grad_of(const Tensor& t) { return t.grad().to_vector<double>(); }
}  // namespace

TEST_CASE("values/engine: a diamond sums the gradients of both paths") {
  // y = x*x feeds both a = 3y and b = y*y; out = a + b. dout/dx = (3 + 2y) * 2x.
  Tensor x = leaf({1.5, -2.0});
  Tensor y = x * x;
  Tensor out = y * 3.0 + y * y;
  out.backward(from_vector<double>({1.0, 1.0}));
  const std::vector<double> g = grad_of(x);
  CHECK(g[0] == doctest::Approx((3 + 2 * 2.25) * 2 * 1.5));
  CHECK(g[1] == doctest::Approx((3 + 2 * 4.0) * 2 * -2.0));
}

TEST_CASE("values/engine: a tensor used twice by one op gets both contributions") {
  Tensor x = leaf({3.0});
  Tensor out = x * x;  // d(x^2)/dx = 2x: the mul node sends a gradient along both of its edges to x
  out.backward();
  CHECK(grad_of(x)[0] == doctest::Approx(6.0));
}

TEST_CASE("values/engine: leaf gradients accumulate across backward calls until zero_grad") {
  Tensor x = leaf({2.0});
  (x * 5.0).backward();
  (x * 5.0).backward();
  CHECK(grad_of(x)[0] == doctest::Approx(10.0));
  autograd::zero_grad(x);
  CHECK_FALSE(x.grad().defined());
  (x * 5.0).backward();
  CHECK(grad_of(x)[0] == doctest::Approx(5.0));
}

TEST_CASE("values/engine: broadcast gradients are reduced to the input shape") {
  Tensor a = randn({4, 3}, kFloat64).requires_grad_();
  Tensor b = randn({3}, kFloat64).requires_grad_();
  Tensor out = a * b;  // b is broadcast over 4 rows
  out.backward(ones({4, 3}, kFloat64));
  CHECK(b.grad().sizes() == Shape{3});
  // d/db_j sum_i a_ij b_j = sum_i a_ij
  const std::vector<double> av = a.to_vector<double>(), gb = grad_of(b);
  for (int j = 0; j < 3; ++j)
    CHECK(gb[j] == doctest::Approx(av[j] + av[3 + j] + av[6 + j] + av[9 + j]));
}

TEST_CASE("errors/engine: a second backward through freed saved tensors says to use retain_graph") {
  Tensor x = leaf({2.0});
  Tensor y = exp(x);  // exp saves its output
  y.backward();
  CHECK_THROWS_CONTAINING(y.backward(), "retain_graph");
}

TEST_CASE("values/engine: retain_graph allows a second backward") {
  Tensor x = leaf({2.0});
  Tensor y = exp(x);
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  CHECK(grad_of(x)[0] == doctest::Approx(2 * std::exp(2.0)));
}

TEST_CASE("values/engine: no_grad records nothing and detach cuts the graph") {
  Tensor x = leaf({1.0, 2.0});
  {
    NoGradGuard no_grad;
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
  }
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.storage() == x.storage());  // detach shares memory
  Tensor z = d * 3.0;
  CHECK_FALSE(z.requires_grad());
}

TEST_CASE("errors/engine: modifying a saved tensor in place is caught at backward time") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * 2.0;         // a non-leaf
  Tensor z = exp(y);          // exp saves its output z
  z.detach().fill_(0.0);      // writes the saved storage through an alias
  CHECK_THROWS_CONTAINING(z.backward(ones({2}, kFloat64)), "modified in place");
  CHECK_THROWS_CONTAINING(z.backward(ones({2}, kFloat64)), "exp");
}

TEST_CASE("values/engine: hooks inspect and replace gradients") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * 3.0;
  std::vector<double> seen;
  autograd::register_hook(y, [&](const Tensor& g) {
    seen = g.to_vector<double>();
    return g * 10.0;  // replaces the gradient flowing into y's producer
  });
  autograd::register_hook(x, [](const Tensor& g) { return g + 1.0; });  // on a leaf: before accumulation
  y.backward(from_vector<double>({1.0, 2.0}));
  CHECK(seen == std::vector<double>{1.0, 2.0});
  const std::vector<double> g = grad_of(x);
  CHECK(g[0] == doctest::Approx(1.0 * 10 * 3 + 1));
  CHECK(g[1] == doctest::Approx(2.0 * 10 * 3 + 1));
}

TEST_CASE("values/engine: a gradient nothing else holds becomes .grad without a copy and a held one is copied") {
  // Taken as it is: the leaf hook's fresh result is held by nothing but the engine once the hook returns.
  Tensor x = leaf({1.0, 2.0});
  const void* fresh = nullptr;
  autograd::register_hook(x, [&](const Tensor& g) {
    Tensor r = g * 1.0;
    fresh = r.data<double>();
    return r;
  });
  sum(x * 2.0).backward();
  CHECK(static_cast<const void*>(x.grad().data<double>()) == fresh);
  // Copied: a hook keeps the incoming gradient, so changing .grad in place must leave the kept one alone.
  Tensor y = leaf({1.0, 2.0});
  Tensor kept;
  autograd::register_hook(y, [&](const Tensor& g) {
    kept = g;
    return Tensor();
  });
  sum(y * 2.0).backward();
  CHECK(y.grad().data<double>() != kept.data<double>());
  autograd::zero_grad(y, /*set_to_none=*/false);
  CHECK(kept.to_vector<double>() == std::vector<double>{2.0, 2.0});
  CHECK(grad_of(y) == std::vector<double>{0.0, 0.0});
}

TEST_CASE("values/engine: a post-accumulate hook runs once per backward, after the summed gradient is stored") {
  Tensor w = leaf({1.0, 2.0});
  Tensor b = leaf({0.5});
  std::vector<std::string> order;
  std::vector<std::vector<double>> seen;
  autograd::register_post_accumulate_grad_hook(w, [&](const Tensor& t) {
    order.push_back("w");
    seen.push_back(t.grad().to_vector<double>());
  });
  autograd::register_post_accumulate_grad_hook(b, [&](const Tensor&) { order.push_back("b"); });
  // w is used by two ops: its hook must see the sum of both paths, and run once.
  const Tensor loss = sum(w * 3.0) + sum(w * w) + sum(b * 2.0);
  loss.backward();
  CHECK(order.size() == 2);
  CHECK(std::count(order.begin(), order.end(), "w") == 1);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{3.0 + 2.0, 3.0 + 4.0});
  // A second backward accumulates into .grad; the hook sees the accumulated value.
  (sum(w * 3.0)).backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == std::vector<double>{8.0, 10.0});
}

TEST_CASE("errors/engine: a post-accumulate hook needs a leaf that requires grad") {
  Tensor w = leaf({1.0});
  CHECK_THROWS_CONTAINING(autograd::register_post_accumulate_grad_hook(w * 2.0, [](const Tensor&) {}),
                          "is the output of an op");
  CHECK_THROWS_CONTAINING(autograd::register_post_accumulate_grad_hook(from_vector<double>({1.0}), [](const Tensor&) {}),
                          "does not require grad");
}

TEST_CASE("values/engine: retain_grad keeps a non-leaf gradient") {
  Tensor x = leaf({1.0, -1.0});
  Tensor y = x * 2.0;
  autograd::retain_grad(y);
  (y * y).backward(ones({2}, kFloat64));
  CHECK(grad_of(y) == std::vector<double>{4.0, -4.0});
  CHECK(grad_of(x) == std::vector<double>{8.0, -8.0});
}

TEST_CASE("values/engine: a 100000-node chain runs and frees without recursion") {
  const int64_t tensors_before = TensorImpl::live_count();
  {
    Tensor x = leaf({1.0});
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = y + 1e-6;
    y.backward();
    CHECK(grad_of(x)[0] == doctest::Approx(1.0));
  }  // dropping y frees the whole chain; Node's destructor must not recurse 100000 deep
  CHECK(TensorImpl::live_count() == tensors_before);
}

TEST_CASE("values/engine: the graph and its saved tensors are freed after backward") {
  const int64_t tensors_before = TensorImpl::live_count();
  const int64_t storages_before = StorageImpl::live_count();
  {
    Tensor w = randn({8, 8}, kFloat64).requires_grad_();
    Tensor x = randn({8, 8}, kFloat64);
    Tensor h = sigmoid(x * w);
    Tensor out = tanh(h * h + w);
    out.backward(ones({8, 8}, kFloat64));
    CHECK(w.grad().defined());
  }
  CHECK(TensorImpl::live_count() == tensors_before);
  CHECK(StorageImpl::live_count() == storages_before);
}

TEST_CASE("errors/engine: backward needs a gradient for a non-scalar root and a root that requires grad") {
  Tensor x = leaf({1.0, 2.0});
  CHECK_THROWS_CONTAINING((x * 2.0).backward(), "single-element");
  Tensor c = from_vector<double>({1.0});
  CHECK_THROWS_CONTAINING(c.backward(), "does not require grad");
  CHECK_THROWS_CONTAINING((x * 2.0).backward(ones({3}, kFloat64)), "does not match");
}

TEST_CASE("values/trace: the backward trace prints each step with shapes and norms") {
  Tensor x = leaf({3.0, 4.0});
  autograd::set_name(x, "x");
  Tensor y = x * 2.0;
  std::ostringstream out;
  {
    autograd::BackwardTraceGuard trace(out);
    y.backward(from_vector<double>({1.0, 0.0}));
  }
  const std::string text = out.str();
  INFO(text);
  CHECK(text.find("[backward 1] mul_scalar") != std::string::npos);
  CHECK(text.find("[backward 2] AccumulateGrad") != std::string::npos);
  CHECK(text.find("shape=(2,)") != std::string::npos);
  CHECK(text.find("values=[2, 0]") != std::string::npos);  // the gradient that reaches x
  CHECK(text.find("norm=2") != std::string::npos);
}

TEST_CASE("values/dot: the DOT export names ops and leaves") {
  Tensor w = leaf({1.0, 2.0});
  autograd::set_name(w, "weight");
  Tensor out = exp(w * w);
  const std::string dot = autograd::to_dot({out});
  INFO(dot);
  CHECK(dot.rfind("digraph autograd {", 0) == 0);
  CHECK(dot.find("exp\\n(2,)") != std::string::npos);
  CHECK(dot.find("mul\\n(2,)") != std::string::npos);
  CHECK(dot.find("weight\\n(2,)") != std::string::npos);
}

TEST_CASE("errors/anomaly: anomaly mode names the op that produced NaN and where it was created") {
  Tensor x = leaf({0.0, 1.0});
  autograd::DetectAnomalyGuard anomaly;
  Tensor y = sqrt(x);  // dy/dx = 1 / (2 sqrt(x)) is Inf at 0
  CHECK_THROWS_CONTAINING(y.backward(ones({2}, kFloat64)), "backward of 'sqrt'");
  Tensor z = sqrt(x);
  CHECK_THROWS_CONTAINING(z.backward(ones({2}, kFloat64)), "created at");
}

TEST_CASE("values/engine: backward rooted at a leaf accumulates into its own grad") {
  Tensor x = leaf({1.0, 2.0});
  x.backward(from_vector<double>({3.0, 4.0}));  // the leaf's sink exists only for this backward
  CHECK(grad_of(x) == std::vector<double>{3.0, 4.0});
}

MINIDET_CUDA_TEST_CASE("cuda/engine: accumulation and broadcast reduction on CUDA match the CPU") {
  // A diamond whose branches broadcast b over a's rows: the engine sums the two paths (add_into) and
  // reduces b's gradient from (64, 33) to (33,) (sum_to), both on the GPU.
  Tensor a_cpu = randn({64, 33}).requires_grad_(), b_cpu = randn({33}).requires_grad_();
  Tensor a_gpu = a_cpu.detach().cuda().requires_grad_(), b_gpu = b_cpu.detach().cuda().requires_grad_();
  auto run = [](const Tensor& a, const Tensor& b) {
    Tensor h = tanh(a * b);
    return h * b + sigmoid(h) - b;
  };
  Tensor up = randn({64, 33});
  run(a_cpu, b_cpu).backward(up);
  run(a_gpu, b_gpu).backward(up.cuda());
  CHECK(b_gpu.grad().device() == Device::cuda());
  CHECK(test::allclose(a_gpu.grad(), a_cpu.grad(), 1e-5, 1e-5));
  CHECK(test::allclose(b_gpu.grad(), b_cpu.grad(), 1e-4, 1e-4));  // sums of 64 rows
}

TEST_CASE("errors/engine: raw in-place writes refuse tensors in the graph") {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor y = x * 2.0;
  // Writing y in place would leave its grad_fn describing values that no longer exist.
  CHECK_THROWS_CONTAINING(y.fill_(0.0), "produced by a recorded op");
  // Copying *from* a tensor that requires grad would silently drop its gradient.
  Tensor plain = zeros({3}, kFloat64);
  CHECK_THROWS_CONTAINING(plain.copy_(y), "the source requires grad");
  NoGradGuard no_grad;  // the documented way: raw writes outside recording
  plain.copy_(y);
  CHECK(plain.to_vector<double>() == std::vector<double>{2, 4, 6});
}

TEST_CASE("values/dot: a leaf root is drawn as its leaf box") {
  Tensor w = leaf({1.0});
  autograd::set_name(w, "w \"quoted\"");
  const std::string dot = autograd::to_dot({w});
  INFO(dot);
  CHECK(dot.find("label=\"w \\\"quoted\\\"\\n(1,)\"") != std::string::npos);
}

TEST_CASE("values/engine: grad returns the inputs' gradients and leaves every .grad alone") {
  // y = sum(a * b + a^2): dy/da = b + 2a, dy/db = a. c reaches y too, but is not asked for.
  const Tensor a = from_vector<double>({1.0, -2.0, 3.0}).requires_grad_();
  const Tensor b = from_vector<double>({0.5, 4.0, -1.0}).requires_grad_();
  const Tensor c = from_vector<double>({2.0}).requires_grad_();
  bool hook_ran = false;
  autograd::register_hook(a, [&](const Tensor&) {
    hook_ran = true;
    return Tensor();
  });
  const Tensor y = sum(add(add(mul(a, b), mul(a, a)), c));
  const autograd::TensorList grads = autograd::grad({y}, {a, b}, {}, /*retain_graph=*/true);
  REQUIRE(grads.size() == 2);
  CHECK(test::allclose(grads[0], from_vector<double>({2.5, 0.0, 5.0}), 0.0, 1e-12));
  CHECK(test::allclose(grads[1], from_vector<double>({1.0, -2.0, 3.0}), 0.0, 1e-12));
  CHECK(!a.grad().defined());
  CHECK(!b.grad().defined());
  CHECK(!c.grad().defined());
  CHECK(!hook_ran);  // a leaf's hooks belong to accumulation into .grad
  // A second output gradient scales the result; an input no path reaches gets an undefined gradient.
  const Tensor unused = from_vector<double>({1.0}).requires_grad_();
  const autograd::TensorList scaled = autograd::grad({y}, {b, unused}, {full({}, 3.0, kFloat64)});
  CHECK(test::allclose(scaled[0], from_vector<double>({3.0, -6.0, 9.0}), 0.0, 1e-12));
  CHECK(!scaled[1].defined());
  CHECK_THROWS_CONTAINING(autograd::grad({y}, {from_vector<double>({1.0})}), "does not require grad");
}
