// Elementwise ops: unary, binary (with broadcasting and scalars) and comparisons.
#include <cmath>
#include <functional>
#include <limits>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/elementwise_raw.h"
#include "ops/elementwise/shared_scalar.h"
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
      {"sin", [](const Tensor& x) { return sin(x); }, -4, 4},
      {"cos", [](const Tensor& x) { return cos(x); }, -4, 4},
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

// The CPU loops take a plain indexed walk (which the compiler vectorises) when every operand has step 1,
// and a strided walk otherwise. Both must give, bit for bit, the scalar formula that the CUDA kernel uses.
template <typename T>
void check_walks_match_formula() {
  using ops::BinaryOp;
  using ops::UnaryOp;
  // (41, 37) values with the special cases mixed in, read through a transposed view (strided) and through
  // a contiguous copy (step 1).
  std::vector<double> raw = (randn({41 * 37}, kFloat64) * 3.0).to_vector<double>();
  const double specials[] = {0.0, -0.0, 1.0, -1.0, 0.5, -2.5, std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  for (size_t i = 0; i < std::size(specials); ++i) raw[i * 97] = specials[i];
  const Tensor strided = from_vector<double>(raw, {41, 37}).to(DTypeOf<T>::value).t();
  const Tensor contiguous = strided.contiguous();
  const Tensor other = (randn({37, 41}, kFloat64) + 0.25).to(DTypeOf<T>::value);
  const std::vector<T> x = contiguous.to_vector<T>(), y = other.to_vector<T>();
  auto expect = [](const std::vector<T>& values) { return from_vector<T>(values, {37, 41}); };
  const double a = 0.7, b = 1.9;  // the scalar operands: PowScalar's exponent, Clamp's and InRange's bounds
  for (int code = 0; code <= static_cast<int>(UnaryOp::Positive); ++code) {
    const UnaryOp op = static_cast<UnaryOp>(code);
    CAPTURE(code);
    std::vector<T> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = ops::apply_unary<T>(op, x[i], a, b);
    CHECK(test::same_bits(ops::detail::unary_raw("test", op, strided, a, b), expect(want)));
    CHECK(test::same_bits(ops::detail::unary_raw("test", op, contiguous, a, b), expect(want)));
  }
  for (int code = 0; code <= static_cast<int>(BinaryOp::Minimum); ++code) {
    const BinaryOp op = static_cast<BinaryOp>(code);
    CAPTURE(code);
    std::vector<T> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = ops::apply_binary<T>(op, x[i], y[i]);
    CHECK(test::same_bits(ops::detail::binary_raw("test", op, strided, other), expect(want)));
    CHECK(test::same_bits(ops::detail::binary_raw("test", op, contiguous, other), expect(want)));
  }
}

TEST_CASE("values/elementwise: contiguous and strided walks give the scalar formula's bits for every op") {
  check_walks_match_formula<float>();
  check_walks_match_formula<double>();
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

// ---- integer operands, scalars and NaN ---------------------------------------------------------------------

TEST_CASE("errors/div: integer operands are refused in every form") {
  const Tensor i = from_vector<int64_t>({6, 0, -3});
  const Tensor u = from_vector<uint8_t>({6, 0, 3});
  // Integer x / 0 would trap (SIGFPE) on the CPU and give garbage on the GPU.
  CHECK_THROWS_CONTAINING(div(i, i), "div: expected float32 or float64 operands, got int64");
  CHECK_THROWS_CONTAINING(i / i, "convert with to(kFloat32) first");
  CHECK_THROWS_CONTAINING(div(u, u), "div: expected float32 or float64 operands, got uint8");
  CHECK_THROWS_CONTAINING(div(i, 2.0), "div: expected float32 or float64 operands, got int64");
  CHECK_THROWS_CONTAINING(div(2.0, i), "div: expected float32 or float64 operands, got int64");
  CHECK_THROWS_CONTAINING(div(ones({3}), i), "got int64");
  CHECK_THROWS_CONTAINING(div(Tensor(), ones({3})), "undefined");
  // Floating division is unchanged, a zero divisor included.
  const std::vector<float> q = div(i.to(kFloat32), 2.0).to_vector<float>();
  CHECK(q == std::vector<float>{3.0f, 0.0f, -1.5f});
  CHECK(std::isinf(div(ones({1}), zeros({1})).item<float>()));
}

TEST_CASE("errors/binary: a scalar that an integer dtype cannot hold is refused") {
  const Tensor i = from_vector<int64_t>({0, 1, 2});
  const Tensor u = from_vector<uint8_t>({0, 5, 255});
  CHECK_THROWS_CONTAINING(add(i, 0.5), "add: the scalar 0.5 is not exactly representable in the tensor's dtype int64");
  CHECK_THROWS_CONTAINING(i + 0.5, "convert the tensor with to(kFloat32) first");
  CHECK_THROWS_CONTAINING(sub(i, 1e19), "sub: the scalar");
  CHECK_THROWS_CONTAINING(mul(i, std::nan("")), "mul: the scalar nan");
  CHECK_THROWS_CONTAINING(mul(u, -1.0), "dtype uint8");
  CHECK_THROWS_CONTAINING(add(u, 256.0), "dtype uint8");
  CHECK_THROWS_CONTAINING(sub(0.5, i), "sub: the scalar 0.5");
}

TEST_CASE("values/binary: representable scalars on integer tensors") {
  const Tensor i = from_vector<int64_t>({0, 1, 2});
  CHECK((i + 1.0).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  CHECK((i - 3.0).to_vector<int64_t>() == std::vector<int64_t>{-3, -2, -1});
  CHECK((i * -2.0).to_vector<int64_t>() == std::vector<int64_t>{0, -2, -4});
  CHECK((10.0 - i).to_vector<int64_t>() == std::vector<int64_t>{10, 9, 8});
  // uint8 x - 1 subtracts 1 (it is not turned into x + (-1), which uint8 could not hold); 0 - 1 wraps.
  const Tensor u = from_vector<uint8_t>({0, 5, 255});
  CHECK((u - 1.0).to_vector<uint8_t>() == std::vector<uint8_t>{255, 4, 254});
  CHECK((u * 1.0).to_vector<uint8_t>() == std::vector<uint8_t>{0, 5, 255});
}

TEST_CASE("values/compare: scalars an integer dtype cannot hold compare in float64") {
  const Tensor i = from_vector<int64_t>({-1, 0, 1});
  CHECK(lt(i, 0.5).to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK(gt(i, -0.5).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(le(i, -0.5).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK(ge(i, 0.5).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(eq(i, 0.5).to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(ne(i, 0.5).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(eq(i, 1.0).to_vector<bool>() == std::vector<bool>{false, false, true});  // representable: exact
  // uint8 against negative and out-of-range scalars (casting them would be undefined behaviour).
  const Tensor u = from_vector<uint8_t>({0, 200, 255});
  CHECK(gt(u, -1.0).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(lt(u, -1.0).to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(le(u, 300.0).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(eq(u, 456.0).to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(gt(u, 199.5).to_vector<bool>() == std::vector<bool>{false, true, true});
  // NaN: every comparison false but ne.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(eq(i, nan).to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(ne(i, nan).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(ge(i, nan).to_vector<bool>() == std::vector<bool>{false, false, false});
  // Beyond the int64 range: INT64_MAX rounds to 2^63 in float64, yet is still below 2^63.
  const Tensor big = from_vector<int64_t>({std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()});
  const double two63 = 9223372036854775808.0;
  CHECK(ge(big, two63).to_vector<bool>() == std::vector<bool>{false, false});
  CHECK(lt(big, two63).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(eq(big, two63).to_vector<bool>() == std::vector<bool>{false, false});
  CHECK(eq(big, -two63).to_vector<bool>() == std::vector<bool>{false, true});  // -2^63 is representable
  CHECK(gt(big, -1e30).to_vector<bool>() == std::vector<bool>{true, true});
  // bool masks hold only 0 and 1.
  const Tensor mask = from_vector<bool>({false, true});
  CHECK(ge(mask, 0.5).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(eq(mask, 2.0).to_vector<bool>() == std::vector<bool>{false, false});
  CHECK(eq(mask, 1.0).to_vector<bool>() == std::vector<bool>{false, true});
  // float tensors are unchanged: the scalar takes their dtype.
  CHECK(lt(from_vector<float>({0.25f, 0.75f}), 0.5).to_vector<bool>() == std::vector<bool>{true, false});
}

TEST_CASE("values/relu: NaN propagates and gets no gradient") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = from_vector<double>({nan, -1, 2}).requires_grad_();
  Tensor y = relu(x);
  const std::vector<double> v = y.to_vector<double>();
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == 0);
  CHECK(v[2] == 2);
  y.backward(from_vector<double>({5, 6, 7}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 7});
  CHECK(std::isnan(relu(from_vector<float>({std::nanf("")})).item<float>()));
}

TEST_CASE("values/maximum: NaN on either side gives NaN") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = from_vector<double>({nan, 1, 3, nan});
  const Tensor b = from_vector<double>({1, nan, 2, nan});
  for (const Tensor& r : {maximum(a, b), maximum(b, a), minimum(a, b), minimum(b, a)}) {
    const std::vector<double> v = r.to_vector<double>();
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[1]));
    CHECK(std::isnan(v[3]));
  }
  CHECK(maximum(a, b).to_vector<double>()[2] == 3);
  CHECK(minimum(a, b).to_vector<double>()[2] == 2);
  CHECK(minimum(from_vector<int64_t>({4, -2}), from_vector<int64_t>({1})).to_vector<int64_t>() ==
        std::vector<int64_t>{1, -2});
}

TEST_CASE("errors/maximum: an input that requires grad is refused while grad mode is on") {
  Tensor x = randn({3}).requires_grad_();
  const Tensor y = randn({3});
  CHECK_THROWS_CONTAINING(maximum(x, y),
                          "maximum has no gradient; use it under NoGradGuard or on tensors that do not require grad");
  CHECK_THROWS_CONTAINING(maximum(y, x), "maximum has no gradient");
  CHECK_THROWS_CONTAINING(minimum(x, y), "minimum has no gradient");
  NoGradGuard no_grad;  // without recording, the raw result is what the caller asked for
  CHECK(maximum(x, y).sizes() == Shape{3});
  CHECK(minimum(x, y).sizes() == Shape{3});
}

TEST_CASE("errors/clamp: NaN bounds are refused and infinite bounds stay valid") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor x = from_vector<double>({-2, 0.5, 3});
  CHECK_THROWS_CONTAINING(clamp(x, nan, 1.0), "clamp: bounds must not be NaN");
  CHECK_THROWS_CONTAINING(clamp(x, 0.0, nan), "clamp: bounds must not be NaN");
  CHECK_THROWS_CONTAINING(clamp_min(x, nan), "must not be NaN");
  CHECK_THROWS_CONTAINING(clamp_max(x, nan), "must not be NaN");
  CHECK(clamp(x, -inf, inf).to_vector<double>() == std::vector<double>{-2, 0.5, 3});
  CHECK(clamp_min(x, 0.0).to_vector<double>() == std::vector<double>{0, 0.5, 3});
  CHECK(clamp_max(x, 1.0).to_vector<double>() == std::vector<double>{-2, 0.5, 1});
}

// ---- floor -------------------------------------------------------------------------------------------------

TEST_CASE("values/floor: rounds toward minus infinity and keeps integers, signed zeros, infinities and NaN") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> x = {-2.5, -2.0, -0.5, -0.0, 0.0, 0.5, 2.999, 3.0, 1e17 + 0.0, -inf, inf};
  const std::vector<double> expected = {-3, -2, -1, -0.0, 0, 0, 2, 3, 1e17, -inf, inf};
  CHECK(floor(from_vector<double>(x)).to_vector<double>() == expected);
  CHECK(floor(from_vector<double>(x).to(kFloat32)).to_vector<float>() ==
        from_vector<double>(expected).to(kFloat32).to_vector<float>());
  CHECK(std::signbit(floor(from_vector<double>({-0.0})).item<double>()));
  CHECK(std::isnan(floor(from_vector<double>({nan})).item<double>()));
  CHECK(floor(empty({0, 3})).sizes() == Shape{0, 3});
}

TEST_CASE("gradcheck/floor: the gradient is zero away from the integers and is recorded") {
  // Fractional parts in [0.1, 0.9): finite differences never step across an integer.
  Generator g(21);
  Tensor base = floor(randn({4, 3}, kFloat64, &g) * 3.0) + rand({4, 3}, kFloat64, &g) * 0.8 + 0.1;
  Tensor x;
  {
    NoGradGuard raw;
    x = base.t();  // non-contiguous, as gradcheck/unary does
  }
  x.requires_grad_();
  const Tensor y = floor(x);
  CHECK(y.requires_grad());  // in the graph, as torch.floor, so compositions stay differentiable
  const autograd::GradcheckResult r =
      autograd::gradcheck([](const TensorList& in) { return floor(in[0]); }, {x});
  CHECK_MESSAGE(r.ok, r.report);
  CHECK(r.max_abs_error == 0.0);
  // The fractional part x - floor(x) has gradient exactly 1: floor contributes an exact 0.
  (x - floor(x)).backward(ones({3, 4}, kFloat64));
  CHECK(x.grad().to_vector<double>() == std::vector<double>(12, 1.0));
  const autograd::GradcheckResult frac =
      autograd::gradcheck([](const TensorList& in) { return in[0] - floor(in[0]); }, {x});
  CHECK_MESSAGE(frac.ok, frac.report);
}

TEST_CASE("errors/floor: integer and undefined inputs") {
  CHECK_THROWS_CONTAINING(floor(ones({2}, kInt64)), "floor: expected input to be float32 or float64");
  CHECK_THROWS_CONTAINING(floor(Tensor()), "floor");
}

MINIDET_CUDA_TEST_CASE("cuda/floor: forward and backward match the CPU") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    Generator g(22);
    const Tensor x_cpu = (randn({37, 29}, kFloat64, &g) * 10.0).to(dtype).requires_grad_();
    const Tensor x_gpu = x_cpu.detach().cuda().requires_grad_();
    const Tensor up = randn({37, 29}, dtype, &g);
    const Tensor y_cpu = floor(x_cpu), y_gpu = floor(x_gpu);
    CHECK(test::max_abs_diff(y_gpu, y_cpu) == 0.0);  // floor is exact on both
    (x_cpu - floor(x_cpu)).backward(up);
    (x_gpu - floor(x_gpu)).backward(up.cuda());
    CHECK(test::max_abs_diff(x_gpu.grad(), x_cpu.grad()) == 0.0);
  }
}

MINIDET_CUDA_TEST_CASE("cuda/elementwise: NaN in relu maximum and minimum and integer scalar compares match the CPU") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor a = from_vector<float>({nan, 1, 3, -2}), b = from_vector<float>({1, nan, 2, -5});
  auto same = [](const Tensor& gpu, const Tensor& cpu) {
    const std::vector<float> g = gpu.cpu().to_vector<float>(), c = cpu.to_vector<float>();
    REQUIRE(g.size() == c.size());
    for (size_t k = 0; k < g.size(); ++k) CHECK((g[k] == c[k] || (std::isnan(g[k]) && std::isnan(c[k]))));
  };
  same(relu(a.cuda()), relu(a));
  same(maximum(a.cuda(), b.cuda()), maximum(a, b));
  same(minimum(b.cuda(), a.cuda()), minimum(b, a));
  const Tensor u = from_vector<uint8_t>({0, 200, 255});
  CHECK(gt(u.cuda(), -1.0).cpu().to_vector<bool>() == gt(u, -1.0).to_vector<bool>());
  CHECK(lt(u.cuda(), 199.5).cpu().to_vector<bool>() == lt(u, 199.5).to_vector<bool>());
}

TEST_CASE("values/shared_scalar: one read-only constant per value dtype and device, and a bounded cache") {
  const Tensor a = shared_scalar(-1.0, kInt64), b = shared_scalar(-1.0, kInt64);
  CHECK(a.is_same(b));  // the same tensor, not an equal one
  CHECK(a.dim() == 0);
  CHECK(a.item<int64_t>() == -1);
  CHECK(!a.requires_grad());
  CHECK(!shared_scalar(-1.0, kFloat32).is_same(a));   // dtype is part of the key
  CHECK(!shared_scalar(0.0, kFloat32).is_same(shared_scalar(-0.0, kFloat32)));  // so are the value's bits
  CHECK(std::signbit(shared_scalar(-0.0, kFloat64).item<double>()));
  // Read-only in fact: a write would change the constant for every other caller.
  CHECK(a.is_read_only());
  CHECK_THROWS_CONTAINING(a.fill_(3.0), "shared_scalar");
  CHECK_THROWS_CONTAINING(a.copy_(full({}, 2.0, kInt64)), "shared_scalar");
  CHECK(shared_scalar(-1.0, kInt64).item<int64_t>() == -1);
  // Comparisons with a double use it and still give the right answer.
  const Tensor x = from_vector<double>({-1, 0, 2});
  CHECK(eq(x, -1.0).to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0});
  // Past the cap, values are still right, but no longer kept.
  for (int i = 0; i < 700; ++i) {
    const double value = 1000.5 + i;
    CHECK(shared_scalar(value, kFloat64).item<double>() == value);
  }
  CHECK(shared_scalar_count() <= 2 * static_cast<int64_t>(kMaxSharedScalars));  // scalars and aranges
}

TEST_CASE("values/shared_arange: one read-only 0..n-1 per length dtype and device, beside the scalars") {
  const Tensor a = shared_arange(4, kInt64);
  CHECK(a.is_same(shared_arange(4, kInt64)));
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(!shared_arange(4, kFloat32).is_same(a));
  CHECK(!shared_arange(5, kInt64).is_same(a));
  CHECK(shared_arange(0, kInt64).numel() == 0);
  CHECK(!a.requires_grad());
  CHECK_THROWS_CONTAINING(a.fill_(1.0), "shared_arange");
  CHECK_THROWS_CONTAINING(shared_arange(-1, kInt64), "expected a length >= 0");
  // Aranges have a cap of their own: in file order values/shared_scalar above has filled the scalars' cap
  // (filling it here would uncache the scalars that case checks when the cases run in another order), and
  // an arange first asked for now is still kept.
  const Tensor late = shared_arange(7, kInt64);
  CHECK(late.is_same(shared_arange(7, kInt64)));
}
