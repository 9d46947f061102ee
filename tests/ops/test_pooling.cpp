// max_pool2d, avg_pool2d, adaptive_avg_pool2d: output sizes (ceil_mode), values, float64 gradient checks,
// CUDA parity and determinism, errors.
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/pooling/pool2d.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using minidet::test::max_abs_diff;

namespace {

// Distinct values 0.1 apart in random order: no two elements of a window are within the gradcheck's
// step of each other, so the argmax never flips (no ties, no kinks).
Tensor distinct(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randperm(shape_numel(shape), kInt64, &g).to(kFloat64).view(shape) * 0.1;
}

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

struct PoolCase {
  std::string what;
  Shape input;
  Pool2dOptions options;
};

std::vector<PoolCase> pool_cases() {
  return {
      {"2x2 stride 2", {2, 3, 6, 6}, Pool2dOptions(2)},
      {"3x3 stride 2 padding 1", {2, 2, 7, 6}, Pool2dOptions(3).set_stride(2).set_padding(1)},
      {"3x2 kernel stride 2 1 ceil_mode", {1, 3, 6, 5}, Pool2dOptions(3, 2).set_stride(2, 1).set_ceil_mode(true)},
      {"ceil_mode with padding", {2, 2, 5, 7}, Pool2dOptions(2).set_stride(2).set_padding(1).set_ceil_mode(true)},
      {"overlapping 3x3 stride 1", {1, 2, 5, 4}, Pool2dOptions(3).set_stride(1).set_padding(1)},
  };
}

}  // namespace

TEST_CASE("values/max_pool2d: 2x2 windows and their argmax indices") {
  const Tensor x = arange(0, 16, 1, kFloat32).view({1, 1, 4, 4});
  const MaxPool2dResult r = max_pool2d_with_indices(x, Pool2dOptions(2));
  CHECK(r.output.to_vector<float>() == std::vector<float>{5, 7, 13, 15});
  CHECK(r.indices.to_vector<int64_t>() == std::vector<int64_t>{5, 7, 13, 15});
  CHECK(r.indices.dtype() == kInt64);
}

TEST_CASE("values/max_pool2d: ceil_mode output sizes follow PyTorch") {
  const auto out_size = [](int64_t h, Pool2dOptions o) { return max_pool2d(zeros({1, 1, h, h}), o).size(2); };
  CHECK(out_size(5, Pool2dOptions(2)) == 2);
  CHECK(out_size(5, Pool2dOptions(2).set_ceil_mode(true)) == 3);
  CHECK(out_size(4, Pool2dOptions(3).set_stride(2).set_padding(1)) == 2);
  CHECK(out_size(4, Pool2dOptions(3).set_stride(2).set_padding(1).set_ceil_mode(true)) == 3);
  // ceil would add a 4th window starting at 5 = H + pad, entirely in the right padding: it is dropped.
  CHECK(out_size(5, Pool2dOptions(2).set_stride(2).set_padding(1).set_ceil_mode(true)) == 3);
  // The partial last window of ceil_mode pools what it covers.
  const Tensor x = arange(0, 25, 1, kFloat64).view({1, 1, 5, 5});
  CHECK(max_pool2d(x, Pool2dOptions(2).set_ceil_mode(true)).to_vector<double>() ==
        std::vector<double>{6, 8, 9, 16, 18, 19, 21, 23, 24});
}

TEST_CASE("values/avg_pool2d: count_include_pad and ceil_mode divisors") {
  const Tensor x = arange(0, 9, 1, kFloat64).view({1, 1, 3, 3});
  CHECK(avg_pool2d(x, Pool2dOptions(2).set_stride(1)).to_vector<double>() == std::vector<double>{2, 3, 5, 6});
  const Tensor x2 = from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2});
  const Pool2dOptions padded = Pool2dOptions(3).set_stride(1).set_padding(1);
  // Every 3x3 window covers all four pixels (sum 10) plus five padding zeros.
  CHECK(avg_pool2d(x2, padded).to_vector<double>() == std::vector<double>(4, 10.0 / 9.0));
  Pool2dOptions no_pad = padded;
  CHECK(avg_pool2d(x2, no_pad.set_count_include_pad(false)).to_vector<double>() == std::vector<double>(4, 2.5));
  // ceil_mode on 3x3 with 2x2: the last window is clipped to the input, and the divisor counts only its
  // pixels (it never reaches the padding, there is none): [0 1;3 4]/4, [2;5]/2, [6 7]/2, [8]/1.
  CHECK(avg_pool2d(x, Pool2dOptions(2).set_ceil_mode(true)).to_vector<double>() == std::vector<double>{2, 3.5, 6.5, 8});
}

TEST_CASE("values/adaptive_avg_pool2d: bins from floor and ceil may overlap") {
  const Tensor x = arange(0, 5, 1, kFloat64).view({1, 1, 1, 5});
  // in 5, out 3: bins [0, 2), [1, 4), [3, 5).
  CHECK(adaptive_avg_pool2d(x, 1, 3).to_vector<double>() == std::vector<double>{0.5, 2, 3.5});
  CHECK(adaptive_avg_pool2d(x, 1, 1).to_vector<double>() == std::vector<double>{2});
}

TEST_CASE("gradcheck/max_pool2d: padding ceil_mode and non-square windows in float64") {
  uint64_t seed = 1;
  for (const PoolCase& c : pool_cases()) {
    CAPTURE(c.what);
    const Tensor x = distinct(c.input, seed++).requires_grad_();
    const Pool2dOptions options = c.options;
    const auto result = autograd::gradcheck([options](const TensorList& in) { return max_pool2d(in[0], options); }, {x});
    MESSAGE("max_pool2d " << c.what << ": max_abs_error " << result.max_abs_error);
    CHECK_MESSAGE(result.ok, result.report);
  }
}

TEST_CASE("gradcheck/avg_pool2d: padding ceil_mode and count_include_pad in float64") {
  uint64_t seed = 20;
  for (const PoolCase& c : pool_cases()) {
    for (bool include_pad : {true, false}) {
      CAPTURE(c.what);
      CAPTURE(include_pad);
      const Tensor x = random(c.input, kFloat64, seed++).requires_grad_();
      Pool2dOptions options = c.options;
      options.set_count_include_pad(include_pad);
      const auto result = autograd::gradcheck([options](const TensorList& in) { return avg_pool2d(in[0], options); }, {x});
      MESSAGE("avg_pool2d " << c.what << " include_pad " << include_pad << ": max_abs_error " << result.max_abs_error);
      CHECK_MESSAGE(result.ok, result.report);
    }
  }
}

TEST_CASE("gradcheck/adaptive_avg_pool2d: shrinking overlapping and growing bins in float64") {
  const std::vector<std::vector<int64_t>> shapes = {{7, 5, 3, 2}, {5, 7, 4, 3}, {3, 3, 5, 4}, {6, 6, 1, 1}};
  uint64_t seed = 40;
  for (const auto& s : shapes) {
    const Tensor x = random({2, 2, s[0], s[1]}, kFloat64, seed++).requires_grad_();
    const int64_t out_h = s[2], out_w = s[3];
    const auto result = autograd::gradcheck(
        [out_h, out_w](const TensorList& in) { return adaptive_avg_pool2d(in[0], out_h, out_w); }, {x});
    MESSAGE("adaptive_avg_pool2d " << s[0] << "x" << s[1] << " to " << s[2] << "x" << s[3] << ": max_abs_error " << result.max_abs_error);
    CHECK_MESSAGE(result.ok, result.report);
  }
}

MINIDET_CUDA_TEST_CASE("cuda/pooling: max avg and adaptive pools match the CPU forward and backward") {
  uint64_t seed = 60;
  std::vector<PoolCase> cases = pool_cases();
  cases.push_back({"larger 3x3 stride 2 padding 1 ceil", {4, 16, 33, 30}, Pool2dOptions(3).set_stride(2).set_padding(1).set_ceil_mode(true)});
  for (const PoolCase& c : cases) {
    CAPTURE(c.what);
    for (DType dtype : {kFloat32, kFloat64}) {
      CAPTURE(dtype);
      const Tensor x_cpu = distinct(c.input, seed++).to(dtype);
      Generator gen(seed++);
      for (int op = 0; op < 3; ++op) {
        CAPTURE(op);
        std::vector<Tensor> results[2];
        for (int device = 0; device < 2; ++device) {
          Tensor x = (device ? x_cpu.cuda() : x_cpu.clone()).requires_grad_();
          const Tensor y = op == 0 ? max_pool2d(x, c.options)
                           : op == 1 ? avg_pool2d(x, c.options)
                                     : adaptive_avg_pool2d(x, c.input[2] / 2 + 1, c.input[3] - 2);
          Generator g(5);
          y.backward(randn(y.sizes(), dtype, &g).to(y.device()));
          results[device] = {y.detach().cpu(), x.grad().cpu()};
        }
        // Same summation order on both devices (see pool2d_cuda.cu), so equal up to rounding at most.
        CHECK(minidet::test::allclose(results[1][0], results[0][0], 1e-6, 1e-6));
        CHECK(minidet::test::allclose(results[1][1], results[0][1], 1e-6, 1e-6));
      }
      const MaxPool2dResult on_cpu = max_pool2d_with_indices(x_cpu, c.options);
      const MaxPool2dResult on_gpu = max_pool2d_with_indices(x_cpu.cuda(), c.options);
      CHECK(on_cpu.indices.to_vector<int64_t>() == on_gpu.indices.to_vector<int64_t>());
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/pooling: gather backward gives identical bits twice") {
  const Tensor x = random({3, 8, 17, 15}, kFloat32, 70).cuda().requires_grad_();
  const Pool2dOptions options = Pool2dOptions(3).set_stride(2).set_padding(1).set_ceil_mode(true);
  std::vector<float> first[2];
  for (int round = 0; round < 2; ++round) {
    for (int op = 0; op < 2; ++op) {
      x.set_grad(Tensor());
      const Tensor y = op == 0 ? max_pool2d(x, options) : avg_pool2d(x, options);
      y.backward(full_like(y, 0.3));
      if (round == 0) first[op] = x.grad().to_vector<float>();
      else CHECK(x.grad().to_vector<float>() == first[op]);
    }
  }
}

TEST_CASE("errors/pooling: padding kernel size dims and output size") {
  const Tensor x = zeros({1, 2, 5, 5});
  CHECK_THROWS_CONTAINING(max_pool2d(x, Pool2dOptions(3).set_padding(2)), "padding should be at most half");
  CHECK_THROWS_CONTAINING(avg_pool2d(x, Pool2dOptions(2).set_padding(0, 2)), "padding should be at most half");
  CHECK_THROWS_CONTAINING(max_pool2d(x, Pool2dOptions(6, 3).set_padding(0, 1)), "larger than the padded input");
  CHECK_THROWS_CONTAINING(avg_pool2d(zeros({2, 5, 5}), Pool2dOptions(2)), "expected input (N, C, H, W) with 4 dims");
  CHECK_THROWS_CONTAINING(max_pool2d(x, Pool2dOptions(0)), "kernel must be >= 1");
  CHECK_THROWS_CONTAINING(max_pool2d(zeros({1, 2, 5, 5}, kInt64), Pool2dOptions(2)), "float32 or float64");
  CHECK_THROWS_CONTAINING(adaptive_avg_pool2d(x, 0, 2), "output size must be >= 1");
  CHECK_THROWS_CONTAINING(adaptive_avg_pool2d(zeros({1, 2, 0, 5}), 2, 2), "non-empty plane");
}

TEST_CASE("values/pooling: batch 0 gives empty outputs") {
  CHECK(max_pool2d(zeros({0, 3, 6, 6}), Pool2dOptions(2)).sizes() == Shape{0, 3, 3, 3});
  CHECK(avg_pool2d(zeros({0, 3, 6, 6}), Pool2dOptions(2)).sizes() == Shape{0, 3, 3, 3});
  CHECK(adaptive_avg_pool2d(zeros({0, 3, 6, 6}), 2, 2).sizes() == Shape{0, 3, 2, 2});
}

TEST_CASE("errors/pooling: an empty plane is refused even when padding leaves room for a window") {
  // Kernel 2 with padding 1 fits a padded extent of 0 + 2; without the plane check this pooled nothing.
  const Pool2dOptions padded = Pool2dOptions(2).set_padding(1);
  CHECK_THROWS_CONTAINING(max_pool2d(zeros({1, 2, 0, 5}), padded), "max_pool2d: expected a non-empty plane");
  CHECK_THROWS_CONTAINING(max_pool2d(zeros({1, 2, 5, 0}), padded), "non-empty plane");
  CHECK_THROWS_CONTAINING(avg_pool2d(zeros({1, 2, 0, 0}), padded), "avg_pool2d: expected a non-empty plane");
  CHECK_THROWS_CONTAINING(avg_pool2d(zeros({0, 2, 0, 5}), padded), "non-empty plane");  // even with N = 0
}

TEST_CASE("values/pooling: zero channels give empty outputs") {
  CHECK(max_pool2d(zeros({2, 0, 6, 6}), Pool2dOptions(2)).sizes() == Shape{2, 0, 3, 3});
  CHECK(avg_pool2d(zeros({2, 0, 6, 6}), Pool2dOptions(2).set_padding(1)).sizes() == Shape{2, 0, 4, 4});
}
