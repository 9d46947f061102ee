// Elementwise ops: unary, binary (with broadcasting and scalars) and comparisons.
#include <cmath>
#include <functional>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {

using UnaryFn = std::function<Tensor(const Tensor&)>;

struct UnaryCase {
  const char* name;
  UnaryFn fn;
  double low, high;  // inputs drawn from [low, high): inside the domain and away from kinks
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return neg(x); }, -2, 2},
      {"exp", [](const Tensor& x) { return exp(x); }, -2, 2},
      {"log", [](const Tensor& x) { return log(x); }, 0.2, 3},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0.2, 3},
      {"abs", [](const Tensor& x) { return abs(x); }, 0.1, 2},  // sign chosen per element below
      {"relu", [](const Tensor& x) { return relu(x); }, 0.1, 2},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -4, 4},
      {"tanh", [](const Tensor& x) { return tanh(x); }, -3, 3},
      {"pow", [](const Tensor& x) { return pow(x, 2.5); }, 0.2, 2},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); }, 0.1, 2},
  };
  return cases;
}

// Uniform values in [low, high); for the kinked ops (abs, relu, clamp) half of them negated, so both sides
// of the kink are covered while staying at least `low` away from it.
Tensor draw(const UnaryCase& c, const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  Tensor u = rand(shape, kFloat64, &g) * (c.high - c.low) + c.low;
  const std::string name = c.name;
  if (name == "abs" || name == "relu" || name == "clamp") {
    Tensor signs = sign(rand(shape, kFloat64, &g) - 0.5);
    u = u * signs;
    if (name == "clamp") u = u * 1.3;  // spread across both clamp bounds, away from -0.5 and 0.7 mostly
  }
  return u.to(dtype);
}

}  // namespace

TEST_CASE("gradcheck/unary: every unary op on a non-contiguous input") {
  for (const UnaryCase& c : unary_cases()) {
    const std::string op = c.name;
    CAPTURE(op);
    Tensor base = draw(c, {4, 3}, kFloat64, 7);
    Tensor x;
    {
      NoGradGuard raw;
      x = base.t();  // (3, 4), strides (1, 3)
    }
    x.requires_grad_();
    auto fn = c.fn;
    auto result = autograd::gradcheck([fn](const TensorList& in) { return fn(in[0]); }, {x});
    MESSAGE(op << ": " << result.report);
    CHECK_MESSAGE(result.ok, result.report);
  }
}

TEST_CASE("gradcheck/binary: add sub mul div with broadcasting") {
  using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, BinaryFn>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
  };
  for (const auto& [name, fn] : ops) {
    const std::string op = name;
    CAPTURE(op);
    Tensor a = randn({2, 3, 4}, kFloat64).requires_grad_();
    Tensor b = (rand({3, 1}, kFloat64) + 0.5).detach().requires_grad_();  // broadcast over dims 0 and 2
    auto result = autograd::gradcheck([fn = fn](const TensorList& in) { return fn(in[0], in[1]); }, {a, b});
    MESSAGE(op << ": " << result.report);
    CHECK_MESSAGE(result.ok, result.report);
  }
}

TEST_CASE("gradcheck/binary: scalar forms on either side") {
  Tensor x = (rand({5}, kFloat64) + 0.5).detach().requires_grad_();
  auto result = autograd::gradcheck(
      [](const TensorList& in) { return (in[0] + 2.0) * 3.0 - 1.5 / in[0] + (4.0 - in[0]) / 2.0; }, {x});
  CHECK_MESSAGE(result.ok, result.report);
}

TEST_CASE("values/elementwise: known results") {
  Tensor x = from_vector<float>({-2.0f, 0.0f, 3.0f});
  CHECK(relu(x).to_vector<float>() == std::vector<float>{0, 0, 3});
  CHECK(abs(x).to_vector<float>() == std::vector<float>{2, 0, 3});
  CHECK(sign(x).to_vector<float>() == std::vector<float>{-1, 0, 1});
  CHECK(clamp(x, -1, 1).to_vector<float>() == std::vector<float>{-1, 0, 1});
  CHECK(sigmoid(from_vector<float>({0.0f})).item<float>() == 0.5f);
  // The stable sigmoid: no overflow at -1000, exact limits.
  CHECK(sigmoid(from_vector<double>({-1000.0, 1000.0})).to_vector<double>() == std::vector<double>{0.0, 1.0});
  Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = from_vector<double>({10, 20, 30});
  CHECK((a + row).to_vector<double>() == std::vector<double>{11, 22, 33, 14, 25, 36});
  CHECK((a * 2.0 - 1.0).to_vector<double>() == std::vector<double>{1, 3, 5, 7, 9, 11});
  CHECK((6.0 / a).to_vector<double>() == std::vector<double>{6, 3, 2, 1.5, 1.2, 1});
  // int64 arithmetic works (no gradient); a scalar goes through a broadcast 0-dim tensor.
  Tensor labels = from_vector<int64_t>({0, 1, 2});
  CHECK((labels + 1.0).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  CHECK(maximum(labels, from_vector<int64_t>({1})).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 2});
}

TEST_CASE("values/compare: comparisons broadcast and return bool") {
  Tensor a = from_vector<double>({1, 2, 3});
  Tensor b = from_vector<double>({2, 2, 2});
  CHECK(gt(a, b).dtype() == kBool);
  CHECK(gt(a, b).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(le(a, 2.0).to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK(eq(a, b).to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK(ne(a.view({3, 1}), a).sizes() == Shape{3, 3});
}

TEST_CASE("values/elementwise: empty tensors give empty results") {
  Tensor e = empty({0, 3});
  CHECK(exp(e).sizes() == Shape{0, 3});
  CHECK((e + ones({3})).sizes() == Shape{0, 3});
  CHECK(gt(e, 0.0).numel() == 0);
}

TEST_CASE("errors/elementwise: mismatched shapes dtypes and non-float inputs") {
  CHECK_THROWS_CONTAINING(add(ones({2, 3}), ones({4})), "do not broadcast");
  CHECK_THROWS_CONTAINING(mul(ones({2}), ones({2}, kFloat64)), "same dtype");
  CHECK_THROWS_CONTAINING(exp(ones({2}, kInt64)), "float32 or float64");
  CHECK_THROWS_CONTAINING(clamp(ones({2}), 1.0, 0.0), "greater than max");
  CHECK_THROWS_CONTAINING(add(Tensor(), ones({2})), "undefined");
}

MINIDET_CUDA_TEST_CASE("errors/elementwise: operands on different devices") {
  CHECK_THROWS_CONTAINING(add(ones({2}), ones({2}, Device::cuda())), "same device");
}

MINIDET_CUDA_TEST_CASE("cuda/unary: forward and backward match the CPU") {
  for (const UnaryCase& c : unary_cases()) {
    const std::string op = c.name;
    CAPTURE(op);
    Tensor x_cpu = draw(c, {37, 29}, kFloat32, 11).requires_grad_();
    Tensor x_gpu = x_cpu.detach().cuda().requires_grad_();
    Tensor up = randn({37, 29});
    Tensor y_cpu = c.fn(x_cpu), y_gpu = c.fn(x_gpu);
    y_cpu.backward(up);
    y_gpu.backward(up.cuda());
    CHECK(test::allclose(y_gpu, y_cpu, 1e-5, 1e-6));
    CHECK(test::allclose(x_gpu.grad(), x_cpu.grad(), 1e-5, 1e-6));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/binary: broadcasting forward and backward match the CPU") {
  Tensor a_cpu = randn({8, 1, 33}).requires_grad_();
  Tensor b_cpu = (rand({5, 1}) + 0.5).detach().requires_grad_();
  Tensor a_gpu = a_cpu.detach().cuda().requires_grad_(), b_gpu = b_cpu.detach().cuda().requires_grad_();
  Tensor up = randn({8, 5, 33});
  Tensor y_cpu = (a_cpu * b_cpu + a_cpu) / b_cpu - 2.0 * b_cpu;
  Tensor y_gpu = (a_gpu * b_gpu + a_gpu) / b_gpu - 2.0 * b_gpu;
  y_cpu.backward(up);
  y_gpu.backward(up.cuda());
  CHECK(test::allclose(y_gpu, y_cpu, 1e-5, 1e-5));
  CHECK(test::allclose(a_gpu.grad(), a_cpu.grad(), 1e-5, 1e-4));
  CHECK(test::allclose(b_gpu.grad(), b_cpu.grad(), 1e-4, 1e-3));  // sums of 264 terms each
  CHECK(gt(a_gpu, b_gpu).cpu().to_vector<bool>() == gt(a_cpu, b_cpu).to_vector<bool>());
}
