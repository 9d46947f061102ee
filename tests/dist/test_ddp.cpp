// dist/: DistributedDataParallel and sharded loading, run by CTest under `mpirun -np 2` (tests/CMakeLists.txt;
// without MPI, as one rank). Every rank runs every case; a case must issue the same collectives on all ranks.
//
// The equality cases train a float64 MLP (no per-rank statistics) two ways in the same process: a reference
// that sees the whole global batch of 2b rows with no communication, and a DDP copy that sees only this
// rank's b rows. With a mean loss, after K SGD steps with momentum the two must agree to float64 rounding.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "core/factories.h"
#include "data/loader/loader.h"
#include "data/shapes/shapes_dataset.h"
#include "dist/ddp.h"
#include "nn/layers/batch_norm.h"
#include "nn/layers/linear.h"
#include "nn/layers/sequential.h"
#include "nn/layers/simple.h"
#include "nn/optim/sgd.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/reduction/reduction.h"
#include "tests/support.h"

using namespace minidet;

namespace {

constexpr int64_t kRowsPerRank = 3, kSteps = 4;

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  Generator generator(seed);
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->push_back(std::make_shared<nn::Linear>(5, 16, true, &generator));
  mlp->push_back(std::make_shared<nn::ReLU>());
  mlp->push_back(std::make_shared<nn::Linear>(16, 7, true, &generator));
  mlp->push_back(std::make_shared<nn::ReLU>());
  mlp->push_back(std::make_shared<nn::Linear>(7, 2, true, &generator));
  mlp->to(kFloat64);
  return mlp;
}

Tensor mse(nn::Sequential& mlp, const Tensor& x, const Tensor& y) { return mean(square(mlp.forward(x) - y)); }

// Trains `steps` steps: the reference on all rows, the DDP copy on this rank's rows. Returns the largest
// parameter difference between the two.
double ddp_versus_reference(dist::DDPOptions options, uint64_t model_seed) {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  auto reference = make_mlp(model_seed);
  // Other ranks start from other weights: the DDP constructor must broadcast rank 0's.
  auto replica = make_mlp(model_seed + static_cast<uint64_t>(group.rank()));
  dist::DistributedDataParallel ddp(*replica, group, options);
  nn::SGD reference_sgd({{reference->parameters(), 0.05, 0.0}}, {0.9});
  nn::SGD replica_sgd({{replica->parameters(), 0.05, 0.0}}, {0.9});
  Generator data(42);  // the same global batches on every rank
  const int64_t rows = kRowsPerRank * group.size();
  for (int64_t step = 0; step < kSteps; ++step) {
    const Tensor x = randn({rows, 5}, kFloat64, &data), y = randn({rows, 2}, kFloat64, &data);
    reference_sgd.zero_grad();
    mse(*reference, x, y).backward();
    reference_sgd.step();
    const Tensor my_x = x.narrow(0, kRowsPerRank * group.rank(), kRowsPerRank);
    const Tensor my_y = y.narrow(0, kRowsPerRank * group.rank(), kRowsPerRank);
    replica_sgd.zero_grad();
    ddp.backward(mse(*replica, my_x, my_y));
    replica_sgd.step();
  }
  const std::vector<Tensor> a = reference->parameters(), b = replica->parameters();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, test::max_abs_diff(a[i], b[i]));
  return worst;
}

}  // namespace

TEST_CASE("values/dist_ddp: 2 ranks of batch b give the parameters of 1 rank of batch 2b") {
  const double diff = ddp_versus_reference({}, 7);
  INFO(dist::ProcessGroup::world().describe());
  CHECK(diff < 1e-12);
}

TEST_CASE("values/dist_ddp: tiny buckets and one bucket and no overlap give the same parameters") {
  dist::DDPOptions tiny, one, blocking;
  tiny.bucket_mb = 1e-6;  // one parameter per bucket
  one.bucket_mb = 1000;
  blocking.overlap = false;
  auto mlp = make_mlp(3);
  CHECK(dist::DistributedDataParallel(*mlp, dist::ProcessGroup::world(), tiny).bucket_names().size() == 6);
  const std::vector<std::vector<std::string>> single =
      dist::DistributedDataParallel(*mlp, dist::ProcessGroup::world(), one).bucket_names();
  REQUIRE(single.size() == 1);
  CHECK(single[0].front() == "4.bias");  // reverse registration order: the last layer's gradients come first
  CHECK(ddp_versus_reference(tiny, 11) < 1e-12);
  CHECK(ddp_versus_reference(one, 11) < 1e-12);
  CHECK(ddp_versus_reference(blocking, 11) < 1e-12);
}

TEST_CASE("values/dist_ddp: no_sync accumulates locally and the next backward reduces the sum") {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  auto reference = make_mlp(5), replica = make_mlp(5);
  dist::DistributedDataParallel ddp(*replica, group);
  Generator data(9);
  const int64_t rows = kRowsPerRank * group.size();
  for (int micro = 0; micro < 2; ++micro) {
    const Tensor x = randn({rows, 5}, kFloat64, &data), y = randn({rows, 2}, kFloat64, &data);
    mse(*reference, x, y).backward();
    const Tensor loss = mse(*replica, x.narrow(0, kRowsPerRank * group.rank(), kRowsPerRank),
                            y.narrow(0, kRowsPerRank * group.rank(), kRowsPerRank));
    if (micro == 0) {
      auto guard = ddp.no_sync();
      ddp.backward(loss);
    } else {
      ddp.backward(loss);
    }
  }
  const std::vector<Tensor> a = reference->parameters(), b = replica->parameters();
  for (size_t i = 0; i < a.size(); ++i) CHECK(test::max_abs_diff(a[i].grad(), b[i].grad()) < 1e-12);
}

TEST_CASE("values/dist_ddp: a parameter without a gradient is reduced as zeros") {
  auto mlp = make_mlp(2);
  dist::DistributedDataParallel ddp(*mlp, dist::ProcessGroup::world());
  // Only the first layer is used: the other layers' parameters get no gradient on any rank.
  auto& first = static_cast<nn::Linear&>(*(*mlp)[0]);
  ddp.backward(mean(first.forward(ones({2, 5}, kFloat64))));
  auto& last = static_cast<nn::Linear&>(*(*mlp)[4]);
  if (dist::ProcessGroup::world().size() == 1) {  // alone, DDP does nothing: backward's own result
    CHECK(!last.weight.grad().defined());
    return;
  }
  REQUIRE(last.weight.grad().defined());
  CHECK(test::max_abs_diff(last.weight.grad(), zeros({2, 7}, kFloat64)) == 0);
  CHECK(test::max_abs_diff(first.bias.grad(), full({16}, 1.0 / 16, kFloat64)) < 1e-15);
}

TEST_CASE("values/dist_ddp: gradients are views of the buckets that stay the same every step") {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  auto reference = make_mlp(4), replica = make_mlp(4);
  dist::DDPOptions one;
  one.bucket_mb = 1000;  // all six parameters in one bucket
  dist::DistributedDataParallel ddp(*replica, group, one);
  nn::SGD reference_sgd({{reference->parameters(), 0.05, 0.0}}, {0.9});
  nn::SGD replica_sgd({{replica->parameters(), 0.05, 0.0}}, {0.9});
  Generator data(8);
  const int64_t rows = kRowsPerRank * group.size();
  const void* first_storage = nullptr;
  for (int64_t step = 0; step < 3; ++step) {
    const Tensor x = randn({rows, 5}, kFloat64, &data), y = randn({rows, 2}, kFloat64, &data);
    reference_sgd.zero_grad();
    mse(*reference, x, y).backward();
    replica_sgd.zero_grad();  // set_to_none: ddp.backward points every .grad at its slot again
    ddp.backward(mse(*replica, x.narrow(0, kRowsPerRank * group.rank(), kRowsPerRank),
                     y.narrow(0, kRowsPerRank * group.rank(), kRowsPerRank)));
    const std::vector<Tensor> a = reference->parameters(), b = replica->parameters();
    for (size_t i = 0; i < a.size(); ++i) CHECK(test::max_abs_diff(a[i].grad(), b[i].grad()) < 1e-12);
    reference_sgd.step();
    replica_sgd.step();
    if (group.size() == 1) continue;  // alone, DDP does nothing: backward's own gradients
    // Reverse registration order: the last parameter's gradient starts the flat buffer, each next one
    // follows it directly.
    int64_t offset = 0;
    for (auto it = b.rbegin(); it != b.rend(); ++it) {
      CHECK(it->grad().storage() == b.back().grad().storage());
      CHECK(it->grad().storage_offset() == offset);
      offset += it->numel();
    }
    if (step == 0) first_storage = b[0].grad().storage().get();
    CHECK(b[0].grad().storage().get() == first_storage);  // no new buffer per step
  }
}

TEST_CASE("values/dist_ddp: BatchNorm buffers are rank 0's on every rank after each backward") {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  nn::BatchNorm2d bn(3);
  bn.to(kFloat64);
  dist::DistributedDataParallel ddp(bn, group);
  Generator data(100 + static_cast<uint64_t>(group.rank()));  // each rank its own images and statistics
  for (int step = 0; step < 2; ++step) {
    ddp.backward(mean(square(bn.forward(randn({2, 3, 4, 4}, kFloat64, &data)))));
    for (const Tensor& buffer : bn.buffers()) {
      const Tensor root = buffer.clone();
      group.broadcast(root, 0, "test: rank 0's buffer");
      CHECK(test::max_abs_diff(root, buffer) == 0);
    }
  }
  CHECK(bn.num_batches_tracked.item<int64_t>() == 2);
  if (group.size() > 1) {  // packed: the two float64 buffers share one flat tensor, the int64 count its own
    CHECK(bn.running_mean.storage() == bn.running_var.storage());
    CHECK(bn.running_var.storage_offset() == 3);
    CHECK(bn.num_batches_tracked.storage() != bn.running_mean.storage());
  }
}

TEST_CASE("errors/dist_ddp: ranks holding different models all stop with one clear error") {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  Generator generator(0);
  nn::Sequential mlp;
  // Rank 1 has a wider hidden layer: the signatures differ, and every rank must refuse (none may wait).
  mlp.push_back(std::make_shared<nn::Linear>(5, group.rank() == 1 ? 9 : 8, true, &generator));
  if (group.size() == 1) {
    CHECK_NOTHROW(dist::DistributedDataParallel(mlp, group));
    return;
  }
  CHECK_THROWS_CONTAINING(dist::DistributedDataParallel(mlp, group), "1 rank(s) hold a model with other parameter");
}

TEST_CASE("values/dist_shard: the ranks' shards cover every image once per epoch") {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  data::ShapesOptions shapes;
  shapes.image_width = shapes.image_height = 16;
  shapes.train_images = 11;  // not a multiple of the global batch: the short last batch is split too
  data::ShapesDataset dataset(data::Split::kTrain, shapes);
  data::LoaderOptions options;
  options.batch_size = 2;
  options.seed = 3;
  options.num_shards = group.size();
  options.shard_index = group.rank();
  data::DataLoader loader(dataset, options);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    std::vector<double> seen;
    int64_t batches = 0;
    while (auto batch = loader.next()) {
      ++batches;
      for (int64_t index : batch->indices) seen.push_back(static_cast<double>(index));
    }
    CHECK(batches == loader.batches_per_epoch());
    std::vector<double> all = group.gather_to_main(seen, "gather of the shards' indices");
    if (!group.is_main()) continue;
    std::sort(all.begin(), all.end());
    REQUIRE(all.size() == 11);
    for (size_t i = 0; i < all.size(); ++i) CHECK(all[i] == static_cast<double>(i));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/dist_ddp: on one GPU per rank (NCCL) DDP matches the CPU reference") {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  if (group.size() > 1 && (!group.with_nccl() || cuda::device_count() < group.local_size())) {
    // Every rank takes the same branch (same build, same machine), so no collective is left unmatched.
    MESSAGE("skipped: needs NCCL and one GPU per rank");
    return;
  }
  const Device device = group.pick_device("cuda");
  auto reference = make_mlp(4), replica = make_mlp(4);
  replica->to(device);
  dist::DistributedDataParallel ddp(*replica, group, {0.001, true, true});
  Generator data(1);
  const int64_t rows = kRowsPerRank * group.size();
  const Tensor x = randn({rows, 5}, kFloat64, &data), y = randn({rows, 2}, kFloat64, &data);
  mse(*reference, x, y).backward();
  ddp.backward(mse(*replica, x.narrow(0, kRowsPerRank * group.rank(), kRowsPerRank).to(device),
                   y.narrow(0, kRowsPerRank * group.rank(), kRowsPerRank).to(device)));
  const std::vector<Tensor> a = reference->parameters(), b = replica->parameters();
  for (size_t i = 0; i < a.size(); ++i) CHECK(test::max_abs_diff(a[i].grad(), b[i].grad().cpu()) < 1e-12);
}

// Run by CTest with MINIDET_DIST_HANG_TEST=1 under mpirun only (it ends the job): rank 1 "hangs" (sleeps)
// while rank 0 waits in a barrier; rank 0's watchdog must stop the job within a few seconds, naming the
// rank and the operation. CTest passes it on that message (PASS_REGULAR_EXPRESSION).
TEST_CASE("errors/dist_watchdog: a rank that hangs stops the job naming the rank and the operation") {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  if (std::getenv("MINIDET_DIST_HANG_TEST") == nullptr || group.size() < 2) {
    MESSAGE("skipped: run by CTest under mpirun with MINIDET_DIST_HANG_TEST=1 (it aborts the job)");
    return;
  }
  group.set_timeout(2);
  if (group.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
  group.barrier("barrier of the hang test");
  FAIL("the watchdog did not stop the job");
}
