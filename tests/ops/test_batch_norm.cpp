// batch_norm2d (training and eval) and frozen_batch_norm2d: running-statistics updates by hand, float64
// gradient checks, CUDA parity, errors.
#include <cmath>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/batch_norm/batch_norm.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using minidet::test::allclose;

namespace {

Tensor random(const Shape& shape, DType dtype, uint64_t seed, double scale = 1.0, double offset = 0.0) {
  Generator g(seed);
  return randn(shape, dtype, &g) * scale + offset;
}

}  // namespace

TEST_CASE("values/batch_norm2d: training normalizes with the biased variance and updates running stats") {
  // One channel, values 1 2 3 6: mean 3, biased var 14/4, unbiased var 14/3.
  const Tensor x = from_vector<double>({1, 2, 3, 6}, {2, 1, 1, 2});
  Tensor running_mean = zeros({1}, kFloat64), running_var = ones({1}, kFloat64);
  const uint64_t version = running_mean.version();
  const Tensor y = batch_norm2d(x, running_mean, running_var, Tensor(), Tensor(), true, 0.1, 1e-5);
  const double invstd = 1.0 / std::sqrt(3.5 + 1e-5);
  const std::vector<double> got = y.to_vector<double>(), want = {-2 * invstd, -1 * invstd, 0, 3 * invstd};
  for (size_t i = 0; i < 4; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
  CHECK(running_mean.item() == doctest::Approx(0.3).epsilon(1e-12));
  CHECK(running_var.item() == doctest::Approx(0.9 + 0.1 * 14.0 / 3.0).epsilon(1e-12));
  CHECK(running_mean.version() > version);  // in place, visible to saved-tensor checks
  // Eval uses the running statistics and the affine parameters.
  const Tensor y_eval = batch_norm2d(x, running_mean, running_var, full({1}, 2.0, kFloat64),
                                     full({1}, 0.5, kFloat64), false);
  const double eval_invstd = 1.0 / std::sqrt(running_var.item() + 1e-5);
  CHECK(y_eval.to_vector<double>()[3] == doctest::Approx(2.0 * (6 - 0.3) * eval_invstd + 0.5).epsilon(1e-12));
  CHECK(running_mean.item() == doctest::Approx(0.3).epsilon(1e-12));  // eval leaves them alone
}

TEST_CASE("values/batch_norm2d: running statistics held in strided views are updated in place") {
  // Column 0 of a (3, 2) tensor: stride 2. The kernel writes through a contiguous copy, copied back.
  const Tensor x = random({2, 3, 2, 2}, kFloat64, 5, 2.0, 1.0);
  const Tensor stats = zeros({3, 2}, kFloat64), running_var = ones({3}, kFloat64);
  const Tensor strided_mean = stats.select(1, 0), contiguous_mean = zeros({3}, kFloat64);
  REQUIRE(!strided_mean.is_contiguous());
  batch_norm2d(x, strided_mean, running_var.clone(), Tensor(), Tensor(), true, 0.1, 1e-5);
  batch_norm2d(x, contiguous_mean, running_var.clone(), Tensor(), Tensor(), true, 0.1, 1e-5);
  CHECK(test::max_abs_diff(strided_mean, contiguous_mean) == 0);
  CHECK(test::max_abs_diff(stats.select(1, 1), zeros({3}, kFloat64)) == 0);  // the other column untouched
  CHECK(test::max_abs_diff(contiguous_mean, zeros({3}, kFloat64)) > 0.05);  // it did move (mean about 1)
}

TEST_CASE("values/frozen_batch_norm2d: fixed scale and shift") {
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {1, 2, 1, 2});
  const Tensor y = frozen_batch_norm2d(x, from_vector<double>({2, 1}), from_vector<double>({0, 1}),
                                       from_vector<double>({1, 3}), from_vector<double>({4, 1}), 0.0);
  // Channel 0: (x - 1) * 2 / 2; channel 1: (x - 3) * 1 / 1 + 1.
  CHECK(y.to_vector<double>() == std::vector<double>{0, 1, 1, 2});
}

TEST_CASE("gradcheck/batch_norm2d: training and eval with and without affine in float64") {
  const Shape shape = {2, 3, 3, 2};
  for (int mode = 0; mode < 4; ++mode) {
    const bool training = mode < 3, affine = mode != 1, running = mode != 2;
    CAPTURE(training);
    CAPTURE(affine);
    CAPTURE(running);
    const Tensor x = random(shape, kFloat64, 100 + mode, 2.0, 0.5).requires_grad_();
    const Tensor w = affine ? random({3}, kFloat64, 200 + mode).requires_grad_() : Tensor();
    const Tensor b = affine ? random({3}, kFloat64, 300 + mode).requires_grad_() : Tensor();
    const Tensor running_mean = running ? random({3}, kFloat64, 400 + mode) : Tensor();
    const Tensor running_var = running ? random({3}, kFloat64, 500 + mode, 0.2, 1.5) : Tensor();
    const auto fn = [=](const TensorList& in) {
      return batch_norm2d(in[0], running_mean, running_var, in[1], in[2], training, 0.1, 1e-5);
    };
    const auto result = autograd::gradcheck(fn, {x, w, b});
    MESSAGE("batch_norm2d training " << training << " affine " << affine << " running stats " << running
                                     << ": max_abs_error "
                                     << result.max_abs_error);
    CHECK_MESSAGE(result.ok, result.report);
  }
}

TEST_CASE("gradcheck/frozen_batch_norm2d: gradient w.r.t. the input only") {
  const Tensor x = random({2, 3, 4, 3}, kFloat64, 1).requires_grad_();
  const Tensor w = random({3}, kFloat64, 2), b = random({3}, kFloat64, 3), rm = random({3}, kFloat64, 4);
  const Tensor rv = random({3}, kFloat64, 5, 0.2, 1.5);
  const auto result = autograd::gradcheck(
      [=](const TensorList& in) { return frozen_batch_norm2d(in[0], w, b, rm, rv); }, {x});
  MESSAGE("frozen_batch_norm2d: max_abs_error " << result.max_abs_error);
  CHECK_MESSAGE(result.ok, result.report);
  // Parameters marked requires_grad still get none: they are fixed by definition.
  const Tensor w_param = w.clone().requires_grad_();
  frozen_batch_norm2d(x, w_param, b, rm, rv).backward(ones({2, 3, 4, 3}, kFloat64));
  CHECK_FALSE(w_param.grad().defined());
}

MINIDET_CUDA_TEST_CASE("cuda/batch_norm2d: training eval and frozen match the CPU forward and backward") {
  const Shape shape = {4, 6, 9, 7};
  for (int mode = 0; mode < 3; ++mode) {
    CAPTURE(mode);
    const Tensor x_cpu = random(shape, kFloat32, 10 + mode, 3.0, 1.0);
    const Tensor w_cpu = random({6}, kFloat32, 20 + mode), b_cpu = random({6}, kFloat32, 30 + mode);
    const Tensor rm_cpu = random({6}, kFloat32, 40 + mode), rv_cpu = random({6}, kFloat32, 50 + mode, 0.2, 1.5);
    std::vector<Tensor> results[2];
    for (int device = 0; device < 2; ++device) {
      const auto move = [&](const Tensor& t) { return device ? t.cuda() : t.clone(); };
      Tensor x = move(x_cpu).requires_grad_(), w = move(w_cpu).requires_grad_(), b = move(b_cpu).requires_grad_();
      Tensor rm = move(rm_cpu), rv = move(rv_cpu);
      const Tensor y = mode == 2 ? frozen_batch_norm2d(x, w, b, rm, rv) : batch_norm2d(x, rm, rv, w, b, mode == 0);
      Generator g(9);
      y.backward(randn(shape, kFloat32, &g).to(y.device()));
      results[device] = {y.detach().cpu(), x.grad().cpu(), rm.cpu(), rv.cpu()};
      if (mode != 2) {
        results[device].push_back(w.grad().cpu());
        results[device].push_back(b.grad().cpu());
      }
    }
    for (size_t i = 0; i < results[0].size(); ++i) {
      CAPTURE(i);
      CHECK(allclose(results[1][i], results[0][i], 1e-4, 1e-4));
    }
  }
}

TEST_CASE("errors/batch_norm2d: wrong channel counts dtypes missing statistics and one value per channel") {
  const Tensor x = zeros({2, 3, 4, 4});
  CHECK_THROWS_CONTAINING(batch_norm2d(x, zeros({4}), ones({4}), Tensor(), Tensor(), false),
                          "expected running_mean of shape (3,)");
  CHECK_THROWS_CONTAINING(batch_norm2d(x, Tensor(), Tensor(), ones({2}), Tensor(), true), "expected weight of shape (3,)");
  CHECK_THROWS_CONTAINING(batch_norm2d(x, zeros({3}, kFloat64), ones({3}, kFloat64), Tensor(), Tensor(), false),
                          "of the same dtype");
  CHECK_THROWS_CONTAINING(batch_norm2d(x, Tensor(), Tensor(), Tensor(), Tensor(), false), "eval mode needs");
  CHECK_THROWS_CONTAINING(batch_norm2d(zeros({1, 3, 1, 1}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                          "more than 1 value per channel");
  CHECK_THROWS_CONTAINING(batch_norm2d(zeros({2, 3, 4}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                          "with 4 dims");
  CHECK_THROWS_CONTAINING(frozen_batch_norm2d(x, ones({3}), zeros({3}), zeros({3}), Tensor()), "running_var is an undefined");
  CHECK_THROWS_CONTAINING(frozen_batch_norm2d(x, ones({3}), zeros({5}), zeros({3}), ones({3})), "expected bias of shape (3,)");
}

MINIDET_CUDA_TEST_CASE("errors/batch_norm2d: statistics on another device") {
  const Tensor x = zeros({2, 3, 4, 4}, Device::cuda());
  CHECK_THROWS_CONTAINING(batch_norm2d(x, zeros({3}), ones({3}), Tensor(), Tensor(), false), "on the same device");
  CHECK_THROWS_CONTAINING(frozen_batch_norm2d(x, ones({3}), zeros({3}), zeros({3}), ones({3})), "on the same device");
}
