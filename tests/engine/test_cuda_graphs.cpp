// engine::CudaGraphs: the detector trained with its backbone, RPN head and RoI box stage replayed as CUDA
// graphs learns exactly what eager training learns, with no added host synchronisation; its inference with the
// backbone's and the RPN head's forward graphs finds the eager twin's detections; and destroying it gives the
// modules their own forward back.
#include <vector>

#include "core/deterministic.h"
#include "core/factories.h"
#include "core/transfer_counts.h"
#include "engine/cuda_graphs.h"
#include "nn/optim/adam.h"
#include "tests/models/deformable_helpers.h"
#include "tests/models/tiny_detector.h"
#include "tests/support.h"

using namespace minidet;
using models::FasterRCNN;
using models::Losses;

namespace {

// A tiny batch in float32, its images on the GPU (targets stay on the CPU, as a loader's).
test::TinyBatch on_gpu(test::TinyBatch b) {
  b.images = b.images.to(kFloat32).to(Device::cuda());
  for (Tensor& box : b.boxes) box = box.to(kFloat32);
  return b;
}

double value(const Tensor& t) { return t.detach().to(Device::cpu()).to(kFloat64).item<double>(); }

// Trains a graphed detector and an eager twin side by side for six steps on `batch(seed)` and checks that
// their losses, gradients and weights agree. The backbone, the RPN head and the box stage replay as graphs
// from the third step on; the twin runs every op eagerly. Same weights, batches and sampling draws: the same
// training. Deterministic kernels (no atomics in deformable conv and RoIAlign), so that six AdamW steps cannot
// amplify a last-bit difference of summation order into a visible one.
void check_graphed_training(const models::DetectorConfig& config, test::TinyBatch (*batch)(uint64_t)) {
  DeterministicGuard deterministic;
  Generator init_a(51), init_b(51);
  FasterRCNN eager(config, &init_a), graphed(config, &init_b);
  test::perturb_offset_predictors(eager, 52);
  test::perturb_offset_predictors(graphed, 52);
  eager.to(Device::cuda());
  graphed.to(Device::cuda());
  engine::CudaGraphs graphs(graphed);
  CHECK(graphed.backbone->forward_replaced());
  CHECK(graphed.rpn->head->forward_replaced());
  CHECK(graphed.roi_heads->forward_replaced());
  CHECK(!eager.backbone->forward_replaced());
  nn::AdamW eager_opt({{eager.parameters(), 0.01, 0.01}}), graphed_opt({{graphed.parameters(), 0.01, 0.01}});
  Generator sample_a(53), sample_b(53);
  for (int step = 0; step < 6; ++step) {
    CAPTURE(step);
    const test::TinyBatch b = on_gpu(batch(60 + static_cast<uint64_t>(step)));
    const TransferCounts before = transfer_counts();
    const Losses got = graphed.forward_train(b.images, b.boxes, b.labels, b.sizes, &sample_b);
    FasterRCNN::total_loss(got).backward();
    CHECK((transfer_counts() - before).device_to_host == 0);  // graphs add no synchronisation
    const Losses want = eager.forward_train(b.images, b.boxes, b.labels, b.sizes, &sample_a);
    FasterRCNN::total_loss(want).backward();
    for (const auto& [name, loss] : want) {
      CAPTURE(name);
      CHECK(value(got.at(name)) == doctest::Approx(value(loss)).epsilon(1e-4));
    }
    // The gradients themselves, before AdamW: its update m / sqrt(v) would hide a gradient scaled by a
    // constant (the features' gradient sums the RPN head's and the box stage's nodes).
    const auto eager_params = eager.named_parameters(), graphed_params = graphed.named_parameters();
    for (size_t i = 0; i < eager_params.size(); ++i) {
      CAPTURE(eager_params[i].first);
      const Tensor want_grad = eager_params[i].second.grad(), got_grad = graphed_params[i].second.grad();
      REQUIRE(want_grad.defined() == got_grad.defined());
      if (want_grad.defined()) CHECK(test::allclose(got_grad.cpu(), want_grad.cpu(), 1e-4, 1e-6));
    }
    graphed_opt.step();
    eager_opt.step();
    graphed_opt.zero_grad();
    eager_opt.zero_grad();
  }
  const auto a = eager.named_parameters(), b = graphed.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i].first);
    CHECK(test::allclose(b[i].second.detach().cpu(), a[i].second.detach().cpu(), 1e-3, 1e-5));
  }
  const auto ab = eager.named_buffers(), bb = graphed.named_buffers();
  for (size_t i = 0; i < ab.size(); ++i) {
    CAPTURE(ab[i].first);
    CHECK(test::allclose(bb[i].second.cpu(), ab[i].second.cpu(), 1e-3, 1e-5));
  }
  // Per graph: 2 warm-up calls, 1 capture, 4 replays (the third call captures, then replays).
  const nn::GraphedCounts counts = graphs.counts();
  CHECK(counts.eager == 3 * 2);
  CHECK(counts.captures == 3 * 1);
  CHECK(counts.replays == 3 * 4);

  // Inference, as an evaluation between steps: the backbone and the RPN head warm up twice, capture their
  // forward graphs, then replay them; the detections are the eager twin's.
  eager.eval();
  graphed.eval();
  for (int call = 0; call < 4; ++call) {
    CAPTURE(call);
    const test::TinyBatch b = on_gpu(batch(80 + static_cast<uint64_t>(call)));
    const auto got = graphed.forward_infer(b.images, b.sizes), want = eager.forward_infer(b.images, b.sizes);
    REQUIRE(got.size() == want.size());
    for (size_t n = 0; n < got.size(); ++n) {
      CAPTURE(n);
      REQUIRE(got[n].boxes.sizes() == want[n].boxes.sizes());
      CHECK(got[n].labels.cpu().to_vector<int64_t>() == want[n].labels.cpu().to_vector<int64_t>());
      CHECK(test::allclose(got[n].boxes.cpu(), want[n].boxes.cpu(), 1e-4, 1e-4));
      CHECK(test::allclose(got[n].scores.cpu(), want[n].scores.cpu(), 1e-4, 1e-5));
    }
  }
  const nn::GraphedCounts after = graphs.counts();
  CHECK(after.eager - counts.eager == 2 * 2);
  CHECK(after.captures - counts.captures == 2);
  CHECK(after.replays - counts.replays == 2 * 2);
  // Back to training: the training graphs replay, nothing is captured again.
  eager.train();
  graphed.train();
  const test::TinyBatch next = on_gpu(batch(90));
  FasterRCNN::total_loss(graphed.forward_train(next.images, next.boxes, next.labels, next.sizes, &sample_b)).backward();
  CHECK(graphs.counts().captures == after.captures);
  CHECK(graphs.counts().replays == after.replays + 3);
}

}  // namespace

MINIDET_CUDA_TEST_CASE("cuda/cuda_graphs: training with graph replays gives the losses and weights of eager training") {
  check_graphed_training(test::tiny_detector_config(), test::tiny_batch);
}

MINIDET_CUDA_TEST_CASE("cuda/cuda_graphs: the rotated detector's graphs (roi_align_rotated in the box stage) too") {
  check_graphed_training(test::tiny_rotated_detector_config(), test::tiny_rotated_batch);
}

TEST_CASE("values/cuda_graphs: installing them replaces the modules' forward and removing them restores it") {
  // On the CPU the replacement runs the modules' own forward (graphs apply to CUDA tensors only), so a model
  // gives the same losses with them installed, and none is left behind once they are gone.
  Generator init(7);
  FasterRCNN model(test::tiny_detector_config(), &init);
  Generator gen(8);
  const Tensor images = rand({1, 3, 32, 32}, kFloat32, &gen);
  const std::vector<Tensor> boxes{from_vector<float>({2.f, 3.f, 20.f, 25.f}, {1, 4})};
  const std::vector<Tensor> labels{from_vector<int64_t>({1}, {1})};
  Generator sample_a(9), sample_b(9);
  const Losses eager = model.forward_train(images, boxes, labels, {}, &sample_a);
  {
    engine::CudaGraphs graphs(model);
    CHECK(model.backbone->forward_replaced());
    const Losses through = model.forward_train(images, boxes, labels, {}, &sample_b);
    for (const auto& [name, loss] : eager) CHECK(value(through.at(name)) == value(loss));
    CHECK(graphs.counts().eager == 3);  // each stage's replacement ran its own code eagerly once
    CHECK(graphs.counts().captures == 0);
  }
  CHECK(!model.backbone->forward_replaced());
  CHECK(!model.rpn->head->forward_replaced());
  CHECK(!model.roi_heads->forward_replaced());
}
