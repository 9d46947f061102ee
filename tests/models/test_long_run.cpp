// Long-run health of detector training: after a few warm-up steps, a training loop must hold a constant
// number of live tensors (storages) and, on CUDA, a constant amount of memory reserved by the caching
// allocator. Anything the autograd graph, an optimizer, the anchors' cache or the samplers kept alive from
// one step to the next would make these grow. CI runs a short loop; MINIDET_LONG_RUN_STEPS runs it longer
// (scripts/long-run.sh).
#include <cstdlib>
#include <string>
#include <vector>

#include "core/factories.h"
#include "core/storage.h"
#include "data/shapes/shapes_dataset.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "ops/elementwise/shared_scalar.h"
#include "nn/optim/adam.h"
#include "tests/support.h"
#if MINIDET_WITH_CUDA
#include "core/cuda/caching_allocator.h"
#endif

using namespace minidet;

namespace {

int64_t long_run_steps(int64_t fallback) {
  const char* env = std::getenv("MINIDET_LONG_RUN_STEPS");
  return env != nullptr && std::atoll(env) > 0 ? std::atoll(env) : fallback;
}

// A small detector on 64 px shapes; images with and without objects, a new batch every step.
struct LongRun {
  data::ShapesDataset dataset;
  models::FasterRCNN model;
  nn::Adam optimizer;
  Generator gen{3};

  static data::ShapesOptions shapes() {
    data::ShapesOptions o;
    o.image_width = o.image_height = 64;
    o.train_images = 64;
    o.empty_fraction = 0.2;
    return o;
  }
  static models::DetectorConfig config() {
    models::DetectorConfig c;
    c.backbone.widths = {8, 16, 16, 16};
    c.roi_heads.representation_size = 32;
    return c;
  }
  explicit LongRun(const Device& device, Generator&& init = Generator(1))
      : dataset(data::Split::kTrain, shapes()), model(config(), &init), optimizer({{model.parameters(), 1e-3}}) {
    model.to(device);
  }

  void step(int64_t i) {
    std::vector<data::Sample> samples;
    std::vector<int64_t> indices;
    for (int64_t k = 0; k < 4; ++k) {
      indices.push_back((4 * i + k) % dataset.size());
      samples.push_back(dataset.get(indices.back()));
    }
    optimizer.zero_grad();
    models::FasterRCNN::total_loss(model.forward_train(data::collate(samples, indices), &gen)).backward();
    optimizer.step();
  }
};

}  // namespace

TEST_CASE("values/long_run: detector training holds a constant number of live tensors") {
  LongRun run(Device::cpu());
  const int64_t warm_up = 3, steps = long_run_steps(12);
  std::vector<int64_t> live;
  for (int64_t i = 0; i < steps; ++i) {
    run.step(i);
    if (i >= warm_up) live.push_back(StorageImpl::live_count() - shared_scalar_count());  // constants: see shared_scalar.h
  }
  MESSAGE("live storages after each step past warm-up: first " << live.front() << ", last " << live.back());
  for (int64_t count : live) CHECK(count == live.front());
}

MINIDET_CUDA_TEST_CASE("cuda/long_run: detector training holds constant live tensors and reserved memory") {
#if MINIDET_WITH_CUDA
  LongRun run(Device::cuda());
  const int64_t warm_up = 5, steps = long_run_steps(20);
  std::vector<int64_t> live, reserved;
  for (int64_t i = 0; i < steps; ++i) {
    run.step(i);
    if (i >= warm_up) {
      live.push_back(StorageImpl::live_count() - shared_scalar_count());  // constants: see shared_scalar.h
      reserved.push_back(cuda::memory_stats().reserved_bytes);
    }
  }
  MESSAGE("live storages " << live.front() << " -> " << live.back() << ", reserved bytes " << reserved.front()
                           << " -> " << reserved.back());
  for (int64_t count : live) CHECK(count == live.front());
  // Batches differ in their numbers of objects, so a new size bin may still appear late; the cache must not
  // keep growing: allow one bin's worth of growth over the whole run, no more.
  CHECK(reserved.back() - reserved.front() <= (int64_t{2} << 20));
#endif
}
