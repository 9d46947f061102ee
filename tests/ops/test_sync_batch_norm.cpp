// sync_batch_norm2d on one process: with the identity all-reduce it is batch_norm2d (outputs, gradients,
// running statistics), float32 and float64, CPU and CUDA; its refusals. Several ranks: tests/dist/.
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/batch_norm/batch_norm.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "ops/sync_batch_norm/sync_batch_norm.h"
#include "tests/support.h"

using namespace minidet;

namespace {

const AllReduceSum kOneRank = [](const Tensor&) {};

struct Run {
  Tensor y, dx, dgamma, dbeta, running_mean, running_var;
};

// One training step of `sync` (sync_batch_norm2d with one rank) or of batch_norm2d, loss sum(y * w).
Run run(bool sync, DType dtype, const Device& device) {
  Generator g(5);
  const Tensor x = (randn({3, 4, 5, 6}, kFloat64, &g) * 2.0 + 7.0).to(dtype).to(device).requires_grad_();
  const Tensor w = randn({3, 4, 5, 6}, kFloat64, &g).to(dtype).to(device);
  const Tensor gamma = (rand({4}, kFloat64, &g) + 0.5).to(dtype).to(device).requires_grad_();
  const Tensor beta = randn({4}, kFloat64, &g).to(dtype).to(device).requires_grad_();
  Run out{Tensor(), Tensor(), Tensor(), Tensor(), (randn({4}, kFloat64, &g) + 6.0).to(dtype).to(device),
          ones({4}, kFloat64).to(dtype).to(device)};
  out.y = sync ? sync_batch_norm2d(x, out.running_mean, out.running_var, gamma, beta, true, kOneRank)
               : batch_norm2d(x, out.running_mean, out.running_var, gamma, beta, true);
  sum(mul(out.y, w)).backward();
  out.y = out.y.detach().cpu();
  out.dx = x.grad().cpu();
  out.dgamma = gamma.grad().cpu();
  out.dbeta = beta.grad().cpu();
  out.running_mean = out.running_mean.cpu();
  out.running_var = out.running_var.cpu();
  return out;
}

void check_same(const Run& a, const Run& b, double tolerance) {
  CHECK(test::max_abs_diff(a.y, b.y) < tolerance);
  CHECK(test::max_abs_diff(a.dx, b.dx) < tolerance);
  CHECK(test::max_abs_diff(a.dgamma, b.dgamma) < 100 * tolerance);  // sums of 90 values
  CHECK(test::max_abs_diff(a.dbeta, b.dbeta) < 100 * tolerance);
  CHECK(test::max_abs_diff(a.running_mean, b.running_mean) < tolerance);
  CHECK(test::max_abs_diff(a.running_var, b.running_var) < tolerance);
}

}  // namespace

TEST_CASE("values/sync_batch_norm: with one rank it is batch_norm2d, to rounding") {
  check_same(run(true, kFloat64, Device::cpu()), run(false, kFloat64, Device::cpu()), 1e-12);
  check_same(run(true, kFloat32, Device::cpu()), run(false, kFloat32, Device::cpu()), 2e-5);
}

TEST_CASE("values/sync_batch_norm: eval mode uses the running statistics and calls no all-reduce") {
  Generator g(6);
  const Tensor x = randn({2, 3, 4, 4}, kFloat64, &g), mean = randn({3}, kFloat64, &g), var = ones({3}, kFloat64);
  int calls = 0;
  const AllReduceSum counting = [&](const Tensor&) { ++calls; };
  const Tensor y = sync_batch_norm2d(x, mean, var, Tensor(), Tensor(), false, counting);
  CHECK(calls == 0);
  CHECK(test::max_abs_diff(y, batch_norm2d(x, mean, var, Tensor(), Tensor(), false)) == 0.0);
}

TEST_CASE("gradcheck/sync_batch_norm: one rank in float64, with and without affine") {
  Generator g(8);
  const Tensor x = randn({2, 3, 2, 3}, kFloat64, &g).requires_grad_();
  const Tensor gamma = (rand({3}, kFloat64, &g) + 0.5).requires_grad_(), beta = randn({3}, kFloat64, &g).requires_grad_();
  const auto with_affine = autograd::gradcheck(
      [&](const autograd::TensorList& in) {
        return sync_batch_norm2d(in[0], Tensor(), Tensor(), in[1], in[2], true, kOneRank);
      },
      {x, gamma, beta});
  CHECK_MESSAGE(with_affine.ok, with_affine.report);
  const auto bare = autograd::gradcheck(
      [&](const autograd::TensorList& in) {
        return sync_batch_norm2d(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true, kOneRank);
      },
      {x});
  CHECK_MESSAGE(bare.ok, bare.report);
}

TEST_CASE("errors/sync_batch_norm: a missing all-reduce, one value per channel, and batch_norm2d's checks") {
  const Tensor x = zeros({1, 2, 1, 1}, kFloat64), stats = zeros({2}, kFloat64), var = ones({2}, kFloat64);
  CHECK_THROWS_CONTAINING(sync_batch_norm2d(zeros({2, 2, 1, 1}, kFloat64), stats, var, Tensor(), Tensor(), true,
                                            AllReduceSum()),
                          "sync_batch_norm2d: no all-reduce given");
  CHECK_THROWS_CONTAINING(sync_batch_norm2d(x, stats, var, Tensor(), Tensor(), true, kOneRank),
                          "expected more than 1 value per channel over all ranks when training, got 1");
  CHECK_THROWS_CONTAINING(sync_batch_norm2d(zeros({2, 3, 1, 1}, kFloat64), stats, var, Tensor(), Tensor(), true,
                                            kOneRank),
                          "sync_batch_norm2d: expected running_mean of shape (3,)");
  CHECK_THROWS_CONTAINING(sync_batch_norm2d(zeros({2, 2}, kFloat64), Tensor(), Tensor(), Tensor(), Tensor(), true,
                                            kOneRank),
                          "sync_batch_norm2d");
}

MINIDET_CUDA_TEST_CASE("cuda/sync_batch_norm: with one rank the CUDA op matches the CPU") {
  check_same(run(true, kFloat64, Device::cuda()), run(true, kFloat64, Device::cpu()), 1e-12);
  check_same(run(true, kFloat32, Device::cuda()), run(true, kFloat32, Device::cpu()), 2e-5);
}
