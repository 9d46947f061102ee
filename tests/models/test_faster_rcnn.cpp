// FasterRCNN: the four losses and their composition from the blocks, inference outputs, an image without
// objects, a float64 gradient check of the whole detector, an overfit run that recovers every object, CUDA
// against the CPU (losses, gradients, host synchronisations), and bad inputs.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "core/transfer_counts.h"
#include "data/shapes/shapes_dataset.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "ops/boxes/box_iou.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "tests/models/deformable_helpers.h"
#include "tests/models/detector_helpers.h"
#include "tests/models/tiny_detector.h"
#include "tests/support.h"

using namespace minidet;
using models::DetectorConfig;
using models::FasterRCNN;
using models::Losses;

namespace {

using test::TinyBatch;
using test::tiny_batch;

double value(const Tensor& t) { return t.detach().to(Device::cpu()).to(kFloat64).item<double>(); }

}  // namespace

TEST_CASE("values/faster_rcnn: four finite losses, equal to the blocks composed, and per-image detections") {
  Generator init(3);
  FasterRCNN model(test::tiny_detector_config(), &init);
  model.to(kFloat64);
  const TinyBatch b = tiny_batch(4);

  Generator gen(5);
  const Losses losses = model.forward_train(b.images, b.boxes, b.labels, b.sizes, &gen);
  REQUIRE(losses.size() == 4);
  for (const char* name : {"loss_objectness", "loss_rpn_box_reg", "loss_classifier", "loss_box_reg"}) {
    CAPTURE(name);
    REQUIRE(losses.count(name) == 1);
    CHECK(losses.at(name).dim() == 0);
    CHECK(std::isfinite(value(losses.at(name))));
    CHECK(value(losses.at(name)) >= 0.0);
  }
  CHECK(value(losses.at("loss_objectness")) > 0.0);
  CHECK(value(losses.at("loss_classifier")) > 0.0);
  const double total = value(FasterRCNN::total_loss(losses));

  // A loader's batch of the same images and targets gives the same step (data::to_device: views of one copy).
  data::Batch batch;
  batch.images = b.images;
  batch.boxes = b.boxes;
  batch.labels = b.labels;
  batch.image_sizes = b.sizes;
  batch.image_ids = {0, 1};
  batch.indices = {0, 1};
  Generator same(5);
  CHECK(value(FasterRCNN::total_loss(model.forward_train(batch, &same))) == total);

  // The same step built by hand from the blocks, with the RPN's proposals of the same weights.
  const models::PaddedProposals proposals = test::rpn_proposals_of(model, b, 5);
  CHECK(value(test::composed_loss(model, b, proposals, 5)) == doctest::Approx(total).epsilon(1e-12));

  // Backward reaches every part, the image without objects included.
  FasterRCNN::total_loss(losses).backward();
  for (const auto& [name, p] : model.named_parameters()) {
    CAPTURE(name);
    REQUIRE(p.grad().defined());
    CHECK(std::isfinite(value(sum(mul(p.grad(), p.grad())))));
  }
  for (const char* part : {"backbone.stem", "offset_conv.weight", "rpn.head.cls_logits", "roi_heads.box_head"}) {
    double norm = 0.0;
    for (const auto& [name, p] : model.named_parameters())
      if (name.find(part) != std::string::npos) norm += value(sum(mul(p.grad(), p.grad())));
    CAPTURE(part);
    CHECK(norm > 0.0);
  }

  // Inference: per image, at most detections_per_image detections, labels in 1..C, boxes in the image.
  model.eval();
  const auto detections = model.forward_infer(b.images, b.sizes);
  REQUIRE(detections.size() == 2);
  for (size_t n = 0; n < detections.size(); ++n) {
    const auto& d = detections[n];
    CHECK(d.boxes.dim() == 2);
    CHECK(d.boxes.size(1) == 4);
    CHECK(d.scores.size(0) == d.boxes.size(0));
    CHECK(d.labels.size(0) == d.boxes.size(0));
    CHECK(d.boxes.size(0) <= model.config().roi_heads.detections_per_image);
    for (int64_t label : d.labels.to_vector<int64_t>()) CHECK((label >= 1 && label <= 2));
    const std::vector<double> coords = d.boxes.to_vector<double>();
    for (size_t i = 0; i < coords.size(); ++i) CHECK(coords[i] <= (i % 2 == 0 ? b.sizes[n][1] : b.sizes[n][0]));
  }
}

TEST_CASE("values/faster_rcnn: a batch of only empty images trains, and forward follows the mode") {
  Generator init(8);
  FasterRCNN model(test::tiny_detector_config(), &init);
  data::Batch batch;
  batch.images = zeros({1, 3, 32, 32});
  batch.boxes = {zeros({0, 4})};
  batch.labels = {zeros({0}, kInt64)};
  batch.image_ids = {0};
  batch.image_sizes = {{32, 32}};
  batch.indices = {0};
  Generator gen(1);
  const models::DetectorOutput out = model.forward(batch, &gen);
  CHECK(out.detections.empty());
  REQUIRE(out.losses.size() == 4);
  CHECK(value(out.losses.at("loss_rpn_box_reg")) == 0.0);
  CHECK(value(out.losses.at("loss_box_reg")) == 0.0);
  CHECK(value(out.losses.at("loss_objectness")) > 0.0);
  FasterRCNN::total_loss(out.losses).backward();
  model.eval();
  const models::DetectorOutput eval = model.forward(batch);
  CHECK(eval.losses.empty());
  CHECK(eval.detections.size() == 1);
}

TEST_CASE("gradcheck/faster_rcnn: the total training loss against parameters of every part") {
  // The proposals are detached (torchvision's choice): the loss's gradient treats them as constants. So the
  // finite differences hold them fixed too (the RPN's proposals at the unperturbed weights), and reseed the
  // samplers at every evaluation so each one makes the same discrete choices.
  Generator init(11);
  FasterRCNN model(test::tiny_detector_config(), &init);
  test::perturb_offset_predictors(model, 12);
  model.to(kFloat64);
  const TinyBatch b = tiny_batch(13);
  const models::PaddedProposals proposals = test::rpn_proposals_of(model, b, 14);
  REQUIRE(proposals.counts.to_vector<int64_t>()[0] > 0);

  // A random subset: from each part, the tensors whose names a seeded draw picks, and always the deformable
  // layer's offset predictor.
  autograd::TensorList inputs;
  std::vector<std::string> names;
  Generator pick(15);
  int64_t elements = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    const bool offset = name.find("offset_conv") != std::string::npos;
    if (!offset && pick.next_uniform() > 0.5) continue;
    inputs.push_back(p);
    names.push_back(name);
    elements += p.numel();
  }
  MESSAGE(names.size() << " of " << model.named_parameters().size() << " parameter tensors, " << elements
                       << " elements");
  for (const char* part : {"backbone.", "rpn.", "roi_heads.", "offset_conv"})
    CHECK(std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.find(part) != std::string::npos; }));

  autograd::GradcheckOptions options;
  options.per_element_limit = 5000;
  const auto result = autograd::gradcheck(
      [&](const autograd::TensorList&) { return test::composed_loss(model, b, proposals, 14); }, inputs, options);
  MESSAGE(result.report);
  CHECK_MESSAGE(result.ok, result.report);
  CHECK(result.entries_checked > 0);
}

TEST_CASE("values/faster_rcnn_overfit: two images, the loss falls and every object is found") {
  data::ShapesOptions shapes;
  shapes.image_width = shapes.image_height = 64;
  shapes.noise_amplitude = 0;
  const data::ShapesDataset dataset(data::Split::kTrain, shapes);
  std::vector<data::Sample> samples;
  std::vector<int64_t> indices;
  for (int64_t i = 0; samples.size() < 2; ++i) {
    data::Sample s = dataset.get(i);
    if (s.boxes.size() < 2) continue;
    samples.push_back(std::move(s));
    indices.push_back(i);
  }
  const data::Batch batch = data::collate(samples, indices);

  DetectorConfig config;
  config.backbone.widths = {16, 32, 64, 64};
  config.roi_heads.representation_size = 64;
  config.backbone.norm = models::NormKind::FrozenBatchNorm;
  Generator init(21);
  FasterRCNN model(config, &init);
  const test::LossDrop loss = test::overfit(model, batch, 250, 2e-3, 22);
  MESSAGE("loss " << loss.first << " -> " << loss.last);
  CHECK(loss.last < 0.25 * loss.first);

  model.eval();
  const std::vector<double> best = test::best_overlaps(batch, batch.boxes, model.forward_infer(batch), box_iou);
  REQUIRE(best.size() >= 4);
  for (size_t m = 0; m < best.size(); ++m) {
    CAPTURE(m);
    CHECK(best[m] > 0.7);
  }
}

TEST_CASE("errors/faster_rcnn: bad images, targets and configs are refused by name") {
  Generator init(31);
  FasterRCNN model(test::tiny_detector_config(), &init);
  const Tensor images = rand({1, 3, 32, 32}, kFloat32, &init);
  const std::vector<Tensor> boxes = {from_vector<float>({2, 2, 20, 20}, {1, 4})};
  const std::vector<Tensor> labels = {from_vector<int64_t>({1}, {1})};
  auto train = [&](const Tensor& im, const std::vector<Tensor>& bx, const std::vector<Tensor>& lb,
                   const models::ImageSizes& sizes = {}) { return model.forward_train(im, bx, lb, sizes); };
  auto one_box = [](std::vector<float> v) { return std::vector<Tensor>{from_vector<float>(v, {1, 4})}; };
  const float nan = std::nanf("");

  CHECK_NOTHROW(train(images, boxes, labels));
  CHECK_THROWS_CONTAINING(train(rand({3, 32, 32}), boxes, labels), "expected images of shape (N, 3, H, W)");
  CHECK_THROWS_CONTAINING(train(rand({1, 1, 32, 32}), boxes, labels), "expected images of shape (N, 3, H, W)");
  CHECK_THROWS_CONTAINING(train(rand({1, 3, 32, 32}, kFloat64), boxes, labels), "but the model is float32");
  CHECK_THROWS_CONTAINING(train(rand({0, 3, 32, 32}), {}, {}), "at least one non-empty image");
  CHECK_THROWS_CONTAINING(train(images, {}, {}), "one boxes and one labels tensor per image (1)");
  CHECK_THROWS_CONTAINING(train(images, {from_vector<float>({2, 2, 20}, {1, 3})}, labels), "expected boxes[0] of shape (M, 4)");
  CHECK_THROWS_CONTAINING(train(images, {from_vector<int64_t>({2, 2, 20, 20}, {1, 4})}, labels), "expected floating boxes[0]");
  CHECK_THROWS_CONTAINING(train(images, boxes, {from_vector<float>({1}, {1})}), "expected int64 labels[0]");
  CHECK_THROWS_CONTAINING(train(images, boxes, {from_vector<int64_t>({1, 2}, {2})}), "expected labels[0] of shape (1)");
  CHECK_THROWS_CONTAINING(train(images, one_box({2, nan, 20, 20}), labels), "is not finite");
  CHECK_THROWS_CONTAINING(train(images, one_box({2, 2, INFINITY, 20}), labels), "is not finite");
  CHECK_THROWS_CONTAINING(train(images, one_box({20, 2, 2, 20}), labels), "empty or inverted");
  CHECK_THROWS_CONTAINING(train(images, one_box({2, 5, 20, 5}), labels), "empty or inverted");
  CHECK_THROWS_CONTAINING(train(images, one_box({2, 2, 40, 20}), labels), "lies outside the image of 32 x 32");
  CHECK_THROWS_CONTAINING(train(images, one_box({-3, 2, 20, 20}), labels), "lies outside the image");
  CHECK_NOTHROW(train(images, one_box({-0.4f, 2, 32.4f, 20}), labels));  // within box_tolerance
  CHECK_THROWS_CONTAINING(train(images, boxes, {from_vector<int64_t>({0}, {1})}), "label 0 of image 0 is 0");
  CHECK_THROWS_CONTAINING(train(images, boxes, {from_vector<int64_t>({3}, {1})}), "expected a class in 1..2");
  CHECK_THROWS_CONTAINING(train(images, boxes, labels, {{32, 32}, {32, 32}}), "one image size per image (1)");
  CHECK_THROWS_CONTAINING(train(images, boxes, labels, {{40, 32}}), "between (1, 1) and the padded batch size");
  CHECK_THROWS_CONTAINING(train(images, one_box({2, 2, 30, 20}), labels, {{32, 16}}), "outside the image of 32 x 16");
  CHECK_THROWS_CONTAINING(model.forward_infer(rand({1, 3, 32, 32}, kFloat64)), "FasterRCNN::forward_infer");
  // A loader's batch is checked the same way, before anything moves.
  data::Batch batch;
  batch.images = images;
  batch.boxes = boxes;
  batch.labels = {from_vector<int64_t>({3}, {1})};
  batch.image_sizes = {{32, 32}};
  CHECK_THROWS_CONTAINING(model.forward_train(batch), "FasterRCNN::forward_train: label 0 of image 0 is 3");
  batch.labels = labels;
  batch.image_sizes = {{32, 16}};
  CHECK_THROWS_CONTAINING(model.forward_train(batch), "outside the image of 32 x 16");
  batch.images = rand({1, 4, 32, 32});
  CHECK_THROWS_CONTAINING(model.forward_train(batch), "expected images of shape (N, 3, H, W)");
  CHECK_THROWS_CONTAINING(FasterRCNN::total_loss({}), "no losses");

  DetectorConfig bad = test::tiny_detector_config();
  bad.rpn.anchor_sizes.clear();
  CHECK_THROWS_CONTAINING(FasterRCNN(bad), "rpn.anchor_sizes must be a non-empty list");
  bad = test::tiny_detector_config();
  bad.num_classes = 0;
  CHECK_THROWS_CONTAINING(FasterRCNN(bad), "num_classes must be at least 1");
}

MINIDET_CUDA_TEST_CASE("cuda/faster_rcnn: losses and gradients match the CPU, with no host synchronisation in a step") {
  Generator init_cpu(41), init_gpu(41);
  FasterRCNN cpu(test::tiny_detector_config(), &init_cpu), gpu(test::tiny_detector_config(), &init_gpu);
  test::perturb_offset_predictors(cpu, 42);
  test::perturb_offset_predictors(gpu, 42);
  cpu.to(kFloat64);
  gpu.to(kFloat64);
  gpu.to(Device::cuda());
  const TinyBatch b = tiny_batch(43);

  Generator gen_cpu(44), gen_gpu(44);
  const Losses on_cpu = cpu.forward_train(b.images, b.boxes, b.labels, b.sizes, &gen_cpu);
  const Tensor images_gpu = b.images.to(Device::cuda());
  CHECK_THROWS_CONTAINING(gpu.forward_train(b.images, b.boxes, b.labels, b.sizes, &gen_gpu), "but the model is float64 on cuda");

  // Targets on the CPU (as a loader gives them): the step never waits for the GPU. The proposals stay one
  // padded table with device-side counts, NMS keeps its result on the device, RoIAlign trusts the
  // detector's own rois, and the target check runs on the host.
  const TransferCounts before = transfer_counts();
  const Losses on_gpu = gpu.forward_train(images_gpu, b.boxes, b.labels, b.sizes, &gen_gpu);
  FasterRCNN::total_loss(on_gpu).backward();
  const TransferCounts step = transfer_counts() - before;
  MESSAGE("one training step on CUDA: " << step.device_to_host << " device-to-host and " << step.host_to_device
                                        << " host-to-device copies");
  CHECK(step.device_to_host == 0);

  FasterRCNN::total_loss(on_cpu).backward();
  for (const auto& [name, loss] : on_cpu) {
    CAPTURE(name);
    CHECK(value(on_gpu.at(name)) == doctest::Approx(value(loss)).epsilon(1e-9));
  }
  const auto cpu_params = cpu.named_parameters(), gpu_params = gpu.named_parameters();
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    CAPTURE(cpu_params[i].first);
    CHECK(test::allclose(gpu_params[i].second.grad().to(Device::cpu()), cpu_params[i].second.grad(), 1e-7, 1e-9));
  }

  // A loader's batch: its targets are checked on the host before anything moves, then reach the GPU in two
  // copies (data::to_device). The step still never waits, and the same draws give the same losses.
  data::Batch batch;
  batch.images = b.images;  // float64 on the CPU: moved to the model's dtype and device
  batch.boxes = b.boxes;
  batch.labels = b.labels;
  batch.image_sizes = b.sizes;
  batch.image_ids = {0, 1};
  batch.indices = {0, 1};
  Generator gen_batch(44);
  const TransferCounts batch_before = transfer_counts();
  const Losses from_batch = gpu.forward_train(batch, &gen_batch);
  CHECK((transfer_counts() - batch_before).device_to_host == 0);
  for (const auto& [name, loss] : on_cpu) {
    CAPTURE(name);
    CHECK(value(from_batch.at(name)) == doctest::Approx(value(loss)).epsilon(1e-9));
  }
}
