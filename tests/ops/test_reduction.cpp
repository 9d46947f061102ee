// Reductions: sum, mean, max/min (along a dim and over everything), argmax/argmin, topk.
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/matmul/matmul.h"
#include "ops/pooling/pool2d.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/copies.h"
#include "ops/shape/views.h"
#include "ops/softmax/softmax.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {

using Fn = std::function<Tensor(const Tensor&)>;

// A float64 (a, b, c) leaf whose memory is laid out as (c, b, a): every dim has a non-unit stride.
Tensor transposed_leaf(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  Tensor base = randn({shape[2], shape[1], shape[0]}, kFloat64, &g);
  Tensor x;
  {
    NoGradGuard raw;
    x = base.permute({2, 1, 0});
  }
  CHECK_FALSE(x.is_contiguous());
  return x.requires_grad_();
}

// autograd::gradcheck seeds backward with from_vector(v, y.sizes()), which is 1-D for a 0-dim y and so does
// not match it; a scalar result is checked as shape (1,) instead (y * ones(1): broadcasting, differentiable).
double inf_d() { return std::numeric_limits<double>::infinity(); }

Tensor as_1d(const Tensor& y) { return y.dim() == 0 ? y * ones({1}, y.options()) : y; }

double check_gradient(const std::string& what, const Fn& fn, const Tensor& x) {
  CAPTURE(what);
  const auto result = autograd::gradcheck([fn](const TensorList& in) { return as_1d(fn(in[0])); }, {x});
  CHECK_MESSAGE(result.ok, result.report);
  return result.max_abs_error;
}

// fn on CUDA against fn on the CPU: forward values and, when fn is differentiable, the input gradient for a
// random upstream gradient.
void check_cuda_matches(const Fn& fn, const Tensor& host_input, double rtol, double atol) {
  Tensor x_cpu = host_input.detach().clone();
  Tensor x_gpu = host_input.detach().cuda();
  const bool differentiable = is_floating(x_cpu.dtype());
  if (differentiable) {
    x_cpu.requires_grad_();
    x_gpu.requires_grad_();
  }
  Tensor y_cpu = fn(x_cpu), y_gpu = fn(x_gpu);
  CHECK(y_gpu.is_cuda());
  CHECK(test::allclose(y_gpu, y_cpu, rtol, atol));
  if (!differentiable || !y_cpu.requires_grad()) return;
  const Tensor up = randn(y_cpu.sizes(), x_cpu.dtype());
  y_cpu.backward(up);
  y_gpu.backward(up.cuda());
  REQUIRE(x_cpu.grad().defined() == x_gpu.grad().defined());
  if (x_cpu.grad().defined()) CHECK(test::allclose(x_gpu.grad(), x_cpu.grad(), rtol, atol));
}

}  // namespace

// ---- gradcheck ------------------------------------------------------------------------------------------------

TEST_CASE("gradcheck/sum: dims lists and keepdim on a non-contiguous input") {
  const Tensor x = transposed_leaf({3, 4, 5}, 1);
  double worst = 0;
  for (bool keepdim : {false, true}) {
    worst = std::max(worst, check_gradient("all", [](const Tensor& t) { return sum(t); }, x));
    worst = std::max(worst, check_gradient("dim 0", [=](const Tensor& t) { return sum(t, {0}, keepdim); }, x));
    worst = std::max(worst, check_gradient("dims 1 and -1", [=](const Tensor& t) { return sum(t, {1, -1}, keepdim); }, x));
    worst = std::max(worst, check_gradient("every dim", [=](const Tensor& t) { return sum(t, {0, 1, 2}, keepdim); }, x));
  }
  MESSAGE("sum: largest gradcheck max_abs_error " << worst);
}

TEST_CASE("gradcheck/mean: dims lists and keepdim on a non-contiguous input") {
  const Tensor x = transposed_leaf({3, 4, 5}, 2);
  double worst = 0;
  for (bool keepdim : {false, true}) {
    worst = std::max(worst, check_gradient("all", [](const Tensor& t) { return mean(t); }, x));
    worst = std::max(worst, check_gradient("dim 1", [=](const Tensor& t) { return mean(t, {1}, keepdim); }, x));
    worst = std::max(worst, check_gradient("dims 0 and 2", [=](const Tensor& t) { return mean(t, {0, 2}, keepdim); }, x));
  }
  MESSAGE("mean: largest gradcheck max_abs_error " << worst);
}

TEST_CASE("gradcheck/max: max and min along every dim with and without keepdim") {
  const Tensor x = transposed_leaf({3, 4, 5}, 3);  // random normals: no ties, gaps far above eps
  double worst = 0;
  for (int64_t dim : {0, 1, 2, -1}) {
    for (bool keepdim : {false, true}) {
      CAPTURE(dim);
      worst = std::max(worst, check_gradient("max", [=](const Tensor& t) { return max(t, dim, keepdim).values; }, x));
      worst = std::max(worst, check_gradient("min", [=](const Tensor& t) { return min(t, dim, keepdim).values; }, x));
    }
  }
  MESSAGE("max/min along a dim: largest gradcheck max_abs_error " << worst);
}

TEST_CASE("gradcheck/max: max and min over all elements") {
  const Tensor x = transposed_leaf({2, 3, 4}, 4);
  double worst = check_gradient("max", [](const Tensor& t) { return max(t); }, x);
  worst = std::max(worst, check_gradient("min", [](const Tensor& t) { return min(t); }, x));
  MESSAGE("max/min over all: largest gradcheck max_abs_error " << worst);
}

TEST_CASE("gradcheck/topk: reduction to the k largest or smallest along inner and outer dims") {
  const Tensor x = transposed_leaf({4, 6, 5}, 5);
  double worst = 0;
  for (int64_t dim : {0, 1, -1}) {
    for (bool largest : {true, false}) {
      CAPTURE(dim);
      CAPTURE(largest);
      worst = std::max(worst, check_gradient("topk", [=](const Tensor& t) { return topk(t, 3, dim, largest).values; }, x));
    }
  }
  MESSAGE("topk: largest gradcheck max_abs_error " << worst);
}

// ---- values ---------------------------------------------------------------------------------------------------

TEST_CASE("values/sum: sums and means by hand including empty tensors") {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(sum(x).item() == 21);
  CHECK(sum(x, {0}).to_vector<double>() == std::vector<double>{5, 7, 9});
  CHECK(sum(x, {1}, true).sizes() == Shape{2, 1});
  CHECK(sum(x, {-1}).to_vector<double>() == std::vector<double>{6, 15});
  CHECK(mean(x).item() == 3.5);
  CHECK(mean(x, {0}).to_vector<double>() == std::vector<double>{2.5, 3.5, 4.5});
  CHECK(sum(from_vector<int64_t>({1, 2, 3})).item<int64_t>() == 6);
  // Empty: a sum of nothing is 0, a mean of nothing NaN; reducing a non-empty dim of an empty tensor is empty.
  const Tensor e = zeros({0, 3}, kFloat64);
  CHECK(sum(e, {0}).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(std::isnan(mean(e).item()));
  CHECK(sum(e, {1}).sizes() == Shape{0});
  CHECK(max(e, 1).values.sizes() == Shape{0});
}

TEST_CASE("values/sum: the gradient of sum and mean is dy repeated") {
  Tensor x = zeros({2, 3}, kFloat64).requires_grad_();
  sum(x, {1}).backward(from_vector<double>({1, 2}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 1, 1, 2, 2, 2});
  Tensor y = zeros({2, 2}, kFloat64).requires_grad_();
  mean(y).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0.25, 0.25, 0.25, 0.25});
}

TEST_CASE("values/max: ties pick the first occurrence and get the whole gradient") {
  Tensor x = from_vector<double>({1, 5, 5, 2, 7, 7, 7, 0}, {2, 4}).requires_grad_();
  const ValuesIndices r = max(x, 1);
  CHECK(r.values.to_vector<double>() == std::vector<double>{5, 7});
  CHECK(r.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(r.indices.dtype() == kInt64);
  r.values.backward(from_vector<double>({10, 20}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 10, 0, 0, 20, 0, 0, 0});
  const ValuesIndices m = min(from_vector<double>({3, 1, 1, 4}, {4}), 0, true);
  CHECK(m.values.sizes() == Shape{1});
  CHECK(m.indices.item<int64_t>() == 1);
  CHECK(argmax(from_vector<double>({1, 9, 3, 9, 0, 2}, {2, 3}), 0).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 0, 0});
  CHECK(argmin(from_vector<int64_t>({4, 2, 2, 8}, {2, 2}), 1, true).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 0});
}

TEST_CASE("values/max: NaN propagates to max and min") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector<double>({1, nan, 3, nan});
  CHECK(std::isnan(max(x, 0).values.item()));
  CHECK(max(x, 0).indices.item<int64_t>() == 1);
  CHECK(std::isnan(min(x).item()));
}

TEST_CASE("values/max: over all elements the gradient is split among ties") {
  Tensor x = from_vector<double>({4, 1, 4, 4, 0, 2}, {2, 3}).requires_grad_();
  const Tensor m = max(x);
  CHECK(m.dim() == 0);
  CHECK(m.item() == 4);
  m.backward(scalar_tensor(3.0, kFloat64));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 0, 1, 1, 0, 0});
  Tensor y = from_vector<double>({2, -1, 5}).requires_grad_();
  min(y).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 1, 0});
}

TEST_CASE("values/topk: reduction to sorted values with their indices ties in input order and NaN largest") {
  const Tensor x = from_vector<double>({3, 1, 4, 1, 5, 9, 2, 6}, {2, 4});
  const ValuesIndices r = topk(x, 2, 1);
  CHECK(r.values.to_vector<double>() == std::vector<double>{4, 3, 9, 6});
  CHECK(r.indices.to_vector<int64_t>() == std::vector<int64_t>{2, 0, 1, 3});
  const ValuesIndices s = topk(x, 3, 1, /*largest=*/false);
  CHECK(s.values.to_vector<double>() == std::vector<double>{1, 1, 3, 2, 5, 6});
  CHECK(s.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0, 2, 0, 3});
  const ValuesIndices c = topk(x, 1, 0);  // along dim 0: the larger of each column
  CHECK(c.values.sizes() == Shape{1, 4});
  CHECK(c.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0, 1});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const ValuesIndices n = topk(from_vector<double>({1, nan, 2}), 2);
  CHECK(std::isnan(n.values.to_vector<double>()[0]));
  CHECK(n.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(topk(x, 0, 1).values.sizes() == Shape{2, 0});
  // A NaN with the sign bit set is a NaN too: largest, in input order with the other NaNs.
  const ValuesIndices signed_nan = topk(from_vector<double>({1, -nan, -inf_d(), nan}), 3);
  CHECK(signed_nan.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0});
  // The gradient goes to the picked elements only.
  Tensor g = from_vector<double>({3, 1, 4, 1}).requires_grad_();
  topk(g, 2).values.backward(from_vector<double>({10, 20}));
  CHECK(g.grad().to_vector<double>() == std::vector<double>{20, 0, 10, 0});
}

TEST_CASE("values/max: over all elements a NaN takes the gradient") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // One NaN: it is the max (NaN propagates) and gets the whole gradient, as max(x, dim) sends it to its index.
  Tensor x = from_vector<double>({1, nan, 3}).requires_grad_();
  const Tensor m = max(x);
  CHECK(std::isnan(m.item()));
  m.backward(scalar_tensor(4.0, kFloat64));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 4, 0});
  Tensor xd = from_vector<double>({1, nan, 3}).requires_grad_();
  max(xd, 0).values.backward(scalar_tensor(4.0, kFloat64));
  CHECK(xd.grad().to_vector<double>() == x.grad().to_vector<double>());
  // Several NaNs share it evenly (like tied values); min behaves the same.
  Tensor y = from_vector<double>({nan, -1, nan, 5}, {2, 2}).requires_grad_();
  min(y).backward(scalar_tensor(3.0, kFloat64));
  CHECK(y.grad().to_vector<double>() == std::vector<double>{1.5, 0, 1.5, 0});
}

TEST_CASE("values/sum: bool uint8 and int64 sum in int64") {
  // Counting a mask: the common use.
  const Tensor x = from_vector<double>({-1, 2, 0.5, 3, -4, 7}, {2, 3});
  const Tensor positives = sum(gt(x, 0.0));
  CHECK(positives.dtype() == kInt64);
  CHECK(positives.dim() == 0);
  CHECK(positives.item<int64_t>() == 4);
  CHECK(sum(gt(x, 0.0), {1}).to_vector<int64_t>() == std::vector<int64_t>{2, 2});
  CHECK(sum(gt(x, 0.0), {0}, true).sizes() == Shape{1, 3});
  // uint8 does not wrap at 256.
  const Tensor u = from_vector<uint8_t>({200, 100, 255});
  CHECK(sum(u).dtype() == kInt64);
  CHECK(sum(u).item<int64_t>() == 555);
  CHECK(sum(from_vector<int64_t>({5, -7}), {0}).to_vector<int64_t>() == std::vector<int64_t>{-2});
  CHECK(sum(zeros({0, 2}, kBool), {0}).to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  CHECK_THROWS_CONTAINING(sum(u, {1}), "sum: dim 1 is out of range");
  // Floating sums keep their dtype.
  CHECK(sum(x).dtype() == kFloat64);
  CHECK(sum(ones({2})).dtype() == kFloat32);
}

TEST_CASE("values/sum: the gradient of sum reaches other backward formulas as an expanded view") {
  // sum hands its consumers a stride-0 view of dy, not a copy. Each consumer below must give the gradient it
  // gives for a dense upstream gradient of ones.
  using Pipeline = std::function<Tensor(const Tensor&)>;
  const Tensor w = randn({4, 3}, kFloat64);
  const std::vector<std::pair<const char*, Pipeline>> pipelines = {
      {"mm", [w](const Tensor& t) { return mm(t, w); }},
      {"log_softmax", [](const Tensor& t) { return log_softmax(t, 1); }},
      {"transpose then mul", [](const Tensor& t) { return transpose(t, 0, 1) * transpose(t, 0, 1); }},
      {"clone then reshape", [](const Tensor& t) { return reshape(clone(t), {4, 2}); }},
      {"max_pool2d", [](const Tensor& t) { return max_pool2d(view(t, {1, 1, 2, 4}), Pool2dOptions(2)); }},
  };
  const Tensor base = randn({2, 4}, kFloat64);
  for (const auto& [name, f] : pipelines) {
    const std::string what = name;
    CAPTURE(what);
    for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}}) {
      Tensor a = base.detach().clone().requires_grad_(), b = base.detach().clone().requires_grad_();
      const Tensor s = sum(f(a), dims);
      s.backward(ones(s.sizes(), kFloat64));
      const Tensor yb = f(b);
      yb.backward(ones(yb.sizes(), kFloat64));
      CHECK(test::max_abs_diff(a.grad(), b.grad()) < 1e-12);
      CHECK(a.grad().is_contiguous());
    }
  }
  // A tensor reached along two paths: the engine adds into a copy, never into the view.
  Tensor x = zeros({2, 3}, kFloat64).requires_grad_();
  (sum(x) + sum(sum(x * 2.0, {1}))).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>(6, 3.0));
}

// ---- errors ---------------------------------------------------------------------------------------------------

TEST_CASE("errors/reduction: bad dims empty reductions dtypes and k") {
  const Tensor x = randn({2, 3});
  CHECK_THROWS_CONTAINING(sum(x, {2}), "sum: dim 2 is out of range");
  CHECK_THROWS_CONTAINING(sum(x, {1, -1}), "appears twice");
  CHECK_THROWS_CONTAINING(mean(from_vector<int64_t>({1, 2})), "mean: expected input to be float32 or float64");
  CHECK_THROWS_CONTAINING(max(x, 3), "max: dim 3 is out of range");
  CHECK_THROWS_CONTAINING(max(zeros({2, 0}), 1), "max: cannot reduce dim 1");
  CHECK_THROWS_CONTAINING(max(zeros({0})), "max: the input of shape (0,) is empty");
  CHECK_THROWS_CONTAINING(argmin(zeros({3}, kBool), 0), "argmin: expected a numeric tensor, got dtype bool");
  CHECK_THROWS_CONTAINING(topk(x, 4, 1), "topk: k = 4 is out of range for dim 1 of size 3");
  CHECK_THROWS_CONTAINING(topk(x, -1), "topk: k = -1");
  CHECK_THROWS_CONTAINING(sum(Tensor()), "sum: input is an undefined tensor");
}

TEST_CASE("errors/mean: integer and bool inputs are refused") {
  CHECK_THROWS_CONTAINING(mean(from_vector<uint8_t>({1, 2})), "mean: expected input to be float32 or float64");
  CHECK_THROWS_CONTAINING(mean(from_vector<bool>({true, false})), "mean: expected input to be float32 or float64");
  CHECK_THROWS_CONTAINING(mean(from_vector<int64_t>({1, 2}), {0}), "mean: expected input to be float32 or float64");
}

// ---- cuda -----------------------------------------------------------------------------------------------------

MINIDET_CUDA_TEST_CASE("cuda/sum: sum and mean match the CPU including long rows and empty tensors") {
  const Tensor x = randn({3, 2500});
  for (bool keepdim : {false, true}) {
    check_cuda_matches([=](const Tensor& t) { return sum(t, {1}, keepdim); }, x, 1e-5, 1e-4);
    check_cuda_matches([=](const Tensor& t) { return mean(t, {0}, keepdim); }, x, 1e-5, 1e-6);
  }
  check_cuda_matches([](const Tensor& t) { return sum(t); }, x.t(), 1e-5, 1e-3);
  check_cuda_matches([](const Tensor& t) { return mean(t, {0}); }, zeros({0, 4}), 0, 0);
  check_cuda_matches([](const Tensor& t) { return sum(t, {1}); }, zeros({5, 0}), 0, 0);
}

MINIDET_CUDA_TEST_CASE("cuda/sum: each kernel shape (thread block or slices per output) matches the CPU") {
  // A thread per output: 8 reduced elements, 40,000 outputs (a batched GEMM's images summed away).
  const Tensor few = randn({8, 200, 200});
  check_cuda_matches([](const Tensor& t) { return sum(t, {0}); }, few, 1e-5, 1e-5);
  // Slices per output: few outputs, many elements; contiguous, strided (dims 0, 2, 3) and all of a tensor.
  const Tensor many = randn({8, 5, 64, 64});
  check_cuda_matches([](const Tensor& t) { return sum(t, {0, 2, 3}); }, many, 1e-5, 1e-4);
  check_cuda_matches([](const Tensor& t) { return sum(t); }, many, 1e-5, 1e-3);
  check_cuda_matches([](const Tensor& t) { return sum(t, {1}); }, randn({3, 300001}), 1e-5, 1e-3);
  check_cuda_matches([](const Tensor& t) { return sum(t, {1, 2, 3}); }, many.to(kFloat64), 1e-12, 1e-12);
  check_cuda_matches([](const Tensor& t) { return sum(t); }, randint(-9, 9, {70001}), 0, 0);
  check_cuda_matches([](const Tensor& t) { return sum(t, {1}); }, randint(-9, 9, {7, 20000}), 0, 0);
  // A block per output: 600 outputs of 100 elements. And past the slice cap (1,024 slices of 4,096): 4.3M.
  check_cuda_matches([](const Tensor& t) { return sum(t, {1}); }, randn({600, 100}), 1e-5, 1e-5);
  check_cuda_matches([](const Tensor& t) { return sum(t); }, randn({4300000}), 1e-5, 1e-2);
  // The split is fixed by the shape, so the bits repeat run after run.
  const Tensor gpu = many.cuda();
  CHECK(test::max_abs_diff(sum(gpu).cpu(), sum(gpu).cpu()) == 0.0);
  CHECK(test::max_abs_diff(sum(gpu, {0, 2, 3}).cpu(), sum(gpu, {0, 2, 3}).cpu()) == 0.0);
}

MINIDET_CUDA_TEST_CASE("cuda/max: max min and argmax match the CPU including long rows and ties") {
  // Long rows (> 1024 elements, so several passes of the block) along the last and the first dim.
  const Tensor x = randn({4, 3000});
  for (int64_t dim : {0, 1}) {
    check_cuda_matches([=](const Tensor& t) { return max(t, dim).values; }, x, 0, 0);
    check_cuda_matches([=](const Tensor& t) { return min(t, dim, true).values; }, x, 0, 0);
    check_cuda_matches([=](const Tensor& t) { return argmax(t, dim); }, x, 0, 0);
    check_cuda_matches([=](const Tensor& t) { return max(t, dim).indices; }, x.t(), 0, 0);
  }
  check_cuda_matches([](const Tensor& t) { return max(t); }, x, 0, 0);
  check_cuda_matches([](const Tensor& t) { return min(t); }, x, 0, 0);
  // Many ties, spread across threads: the CUDA tree must still return the first one.
  const Tensor ties = randint(0, 3, {5, 2049}).to(kFloat32);
  check_cuda_matches([](const Tensor& t) { return argmax(t, 1); }, ties, 0, 0);
  check_cuda_matches([](const Tensor& t) { return argmin(t, 0); }, ties, 0, 0);
  check_cuda_matches([](const Tensor& t) { return max(t); }, ties, 0, 0);
  check_cuda_matches([](const Tensor& t) { return argmax(t, 1); }, randint(-5, 5, {3, 1500}), 0, 0);
  check_cuda_matches([](const Tensor& t) { return max(t, 1).values; }, zeros({0, 7}), 0, 0);
}

MINIDET_CUDA_TEST_CASE("cuda/topk: the topk reduction matches the CPU including long rows ties and empty tensors") {
  const Tensor x = randn({6, 3000});
  for (bool largest : {true, false}) {
    check_cuda_matches([=](const Tensor& t) { return topk(t, 50, 1, largest).values; }, x, 0, 0);
    check_cuda_matches([=](const Tensor& t) { return topk(t, 50, 1, largest).indices; }, x, 0, 0);
    check_cuda_matches([=](const Tensor& t) { return topk(t, 2, 0, largest).values; }, x, 0, 0);
  }
  const Tensor ties = randint(0, 4, {3, 1200}).to(kFloat32);
  check_cuda_matches([](const Tensor& t) { return topk(t, 700, 1).indices; }, ties, 0, 0);
  check_cuda_matches([](const Tensor& t) { return topk(t, 5, 1, false).indices; }, randint(-9, 9, {4, 100}), 0, 0);
  check_cuda_matches([](const Tensor& t) { return topk(t, 0, 1).values; }, x, 0, 0);
  check_cuda_matches([](const Tensor& t) { return topk(t, 3, 1).values; }, zeros({0, 5}), 0, 0);
  // k = n along the last dim sorts straight into the outputs; along another dim it goes through a copy.
  check_cuda_matches([](const Tensor& t) { return topk(t, 1200, 1).indices; }, ties, 0, 0);
  check_cuda_matches([](const Tensor& t) { return topk(t, 1200, 1, false).values; }, ties, 0, 0);
  check_cuda_matches([](const Tensor& t) { return topk(t, 3, 0).indices; }, ties, 0, 0);
  check_cuda_matches([](const Tensor& t) { return topk(t, 100, 1, false).indices; }, randint(-9, 9, {4, 100}), 0, 0);
}

MINIDET_CUDA_TEST_CASE("cuda/topk: a NaN with the sign bit set counts as largest as on the CPU") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // -nan has the sign bit set; a radix sort on raw bits would put it below -inf.
  const Tensor x = from_vector<float>({1, -nan, -inf, 2, nan, inf, -3}, {1, 7});
  for (bool largest : {true, false}) {
    CAPTURE(largest);
    const ValuesIndices cpu = topk(x, 7, 1, largest), gpu = topk(x.cuda(), 7, 1, largest);
    CHECK(gpu.indices.cpu().to_vector<int64_t>() == cpu.indices.to_vector<int64_t>());
  }
  CHECK(topk(x.cuda(), 2, 1).indices.cpu().to_vector<int64_t>() == std::vector<int64_t>{1, 4});
  CHECK(topk(x.cuda(), 2, 1, false).indices.cpu().to_vector<int64_t>() == std::vector<int64_t>{2, 6});
  check_cuda_matches([](const Tensor& t) { return sum(gt(t, 0.0)); }, x, 0, 0);
}
