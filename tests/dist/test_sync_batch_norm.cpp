// dist/ with nn::SyncBatchNorm2d (ops/sync_batch_norm/sync_batch_norm.h), run by CTest under `mpirun -np 2`
// (as one rank without MPI). Each rank holds a slice of one global batch that every rank draws from the same
// seed; the reference is a plain BatchNorm2d on the whole batch, in the same process. With the loss
// L_r = sum(y_r * w_r) on each rank, the sum of the ranks' losses is the reference's loss, so:
//   every rank's outputs and input gradients are the reference's rows of that rank;
//   the sum over ranks of the weight and bias gradients is the reference's (DDP would average them);
//   the running statistics on every rank are the reference's.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "core/cuda/availability.h"
#include "core/factories.h"
#include "dist/process_group.h"
#include "nn/layers/batch_norm.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "ops/sync_batch_norm/sync_batch_norm.h"
#include "tests/support.h"

using namespace minidet;

namespace {

constexpr int64_t kChannels = 3, kHeight = 4, kWidth = 5;

// Images per rank: 2 each, or rank r holding r + 1 (unequal).
std::vector<int64_t> images_per_rank(int ranks, bool unequal) {
  std::vector<int64_t> n(static_cast<size_t>(ranks), 2);
  if (unequal)
    for (int r = 0; r < ranks; ++r) n[static_cast<size_t>(r)] = r + 1;
  return n;
}

template <typename Norm>
std::shared_ptr<Norm> make_norm(const Device& device) {
  auto norm = std::make_shared<Norm>(kChannels);
  norm->to(kFloat64);
  Generator init(3);
  NoGradGuard raw;
  norm->weight.copy_(add(rand({kChannels}, kFloat64, &init), 0.5));
  norm->bias.copy_(randn({kChannels}, kFloat64, &init));
  norm->running_mean.copy_(randn({kChannels}, kFloat64, &init));
  norm->to(device);
  return norm;
}

void check_against_whole_batch(bool unequal, const Device& device) {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  const std::vector<int64_t> n = images_per_rank(group.size(), unequal);
  const int64_t total = std::accumulate(n.begin(), n.end(), int64_t{0});
  const int64_t first = std::accumulate(n.begin(), n.begin() + group.rank(), int64_t{0});
  const int64_t mine = n[static_cast<size_t>(group.rank())];
  Generator data(7);  // the same global batch on every rank, away from 0 so the shift matters
  const Tensor x = add(mul(randn({total, kChannels, kHeight, kWidth}, kFloat64, &data), 2.0), 3.0);
  const Tensor w = randn({total, kChannels, kHeight, kWidth}, kFloat64, &data);

  auto reference = make_norm<nn::BatchNorm2d>(Device::cpu());
  auto synced = make_norm<nn::SyncBatchNorm2d>(device);
  const Tensor x_all = x.clone().requires_grad_();
  const Tensor y_all = (*reference)(x_all);
  sum(mul(y_all, w)).backward();

  const Tensor x_mine = x.narrow(0, first, mine).to(device).clone().requires_grad_();
  const Tensor y_mine = (*synced)(x_mine);
  sum(mul(y_mine, w.narrow(0, first, mine).to(device))).backward();

  CHECK(test::max_abs_diff(y_mine.detach().cpu(), y_all.detach().narrow(0, first, mine)) < 1e-12);
  CHECK(test::max_abs_diff(x_mine.grad().cpu(), x_all.grad().narrow(0, first, mine)) < 1e-12);
  for (const auto& [mine_grad, whole_grad] : {std::pair{synced->weight.grad(), reference->weight.grad()},
                                             std::pair{synced->bias.grad(), reference->bias.grad()}}) {
    const Tensor summed = mine_grad.contiguous().clone();
    group.all_reduce_sum(summed, "test: parameter gradients");
    CHECK(test::max_abs_diff(summed.cpu(), whole_grad) < 1e-11);
  }
  CHECK(test::max_abs_diff(synced->running_mean.cpu(), reference->running_mean) < 1e-13);
  CHECK(test::max_abs_diff(synced->running_var.cpu(), reference->running_var) < 1e-12);
  CHECK(synced->num_batches_tracked.cpu().item<int64_t>() == 1);
}

}  // namespace

TEST_CASE("values/sync_batch_norm: ranks each on half the batch give the outputs and gradients and statistics of one") {
  check_against_whole_batch(false, Device::cpu());
}

TEST_CASE("values/sync_batch_norm: unequal per-rank batches give the outputs and gradients and statistics of one") {
  check_against_whole_batch(true, Device::cpu());
}

TEST_CASE("gradcheck/sync_batch_norm: finite differences of the sum of every rank's loss") {
  // gradcheck perturbs one input at a time on one process; here an input of rank r moves every rank's loss,
  // so the numerical derivative is of sum_r L_r, all-reduced, with every rank perturbing the same entry of
  // the global batch (only the rank holding it sees a change in its input).
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  const std::vector<int64_t> n = images_per_rank(group.size(), true);
  const int64_t total = std::accumulate(n.begin(), n.end(), int64_t{0});
  const int64_t first = std::accumulate(n.begin(), n.begin() + group.rank(), int64_t{0});
  const int64_t mine = n[static_cast<size_t>(group.rank())];
  Generator data(11);
  const Tensor x = randn({total, 2, 2, 3}, kFloat64, &data), w = randn({total, 2, 2, 3}, kFloat64, &data);
  const Tensor gamma = add(rand({2}, kFloat64, &data), 0.5), beta = randn({2}, kFloat64, &data);
  const AllReduceSum reduce = [&](const Tensor& t) { group.all_reduce_sum(t, "test: sync_batch_norm2d"); };
  auto total_loss = [&](const Tensor& input, const Tensor& g, const Tensor& b) {
    const Tensor y = sync_batch_norm2d(input.narrow(0, first, mine), Tensor(), Tensor(), g, b, true, reduce);
    return group.all_reduce_sum({sum(mul(y, w.narrow(0, first, mine))).item<double>()}, "test: loss")[0];
  };

  const Tensor xl = x.narrow(0, first, mine).clone().requires_grad_(), gl = gamma.clone().requires_grad_(),
               bl = beta.clone().requires_grad_();
  sum(mul(sync_batch_norm2d(xl, Tensor(), Tensor(), gl, bl, true, reduce), w.narrow(0, first, mine))).backward();
  // The analytic gradient of sum_r L_r: each rank's rows of x, and the sum of the ranks' gamma and beta shares.
  Tensor dx = zeros(x.sizes(), kFloat64);
  dx.narrow(0, first, mine).copy_(xl.grad());
  const double h = 1e-6;
  double worst = 0.0;
  for (const auto& [analytic_share, value] : {std::pair{dx, x}, std::pair{gl.grad(), gamma}, std::pair{bl.grad(), beta}}) {
    const Tensor analytic = analytic_share.contiguous().clone();
    group.all_reduce_sum(analytic, "test: analytic gradient");
    const std::vector<double> expected = analytic.to_vector<double>();
    for (int64_t i = 0; i < value.numel(); ++i) {
      auto at = [&](double delta) {
        Tensor moved = value.clone();
        moved.data<double>()[i] += delta;
        return total_loss(value.is_same(x) ? moved : x, value.is_same(gamma) ? moved : gamma,
                          value.is_same(beta) ? moved : beta);
      };
      const double numeric = (at(h) - at(-h)) / (2 * h);
      worst = std::max(worst, std::abs(numeric - expected[static_cast<size_t>(i)]));
    }
  }
  MESSAGE("largest |analytic - numeric| over x, gamma, beta on " << group.size() << " rank(s): " << worst);
  CHECK(worst < 1e-7);
}

MINIDET_CUDA_TEST_CASE("cuda/sync_batch_norm: on one GPU per rank (NCCL) the ranks match one CPU BatchNorm") {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  if (group.size() > 1 && (!group.with_nccl() || cuda::device_count() < group.local_size())) {
    MESSAGE("skipped: needs NCCL and one GPU per rank");  // every rank takes the same branch
    return;
  }
  const Device device = group.pick_device("cuda");
  check_against_whole_batch(false, device);
  check_against_whole_batch(true, device);
}
