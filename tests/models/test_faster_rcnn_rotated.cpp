// FasterRCNN with box_type = rotated (RRPN-style): the four losses and their composition from the blocks,
// (D, 5) detections, a float64 gradient check of the whole detector, an overfit run on rotated shapes that
// finds every object by rotated IoU, CUDA against the CPU, and bad rotated targets.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "core/transfer_counts.h"
#include "data/shapes/rotated_shapes_dataset.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/cat.h"
#include "tests/models/deformable_helpers.h"
#include "tests/models/detector_helpers.h"
#include "tests/models/tiny_detector.h"
#include "tests/support.h"

using namespace minidet;
using models::DetectorConfig;
using models::FasterRCNN;
using models::Losses;

namespace {

constexpr double kPi = 3.14159265358979323846;

double value(const Tensor& t) { return t.detach().to(Device::cpu()).to(kFloat64).item<double>(); }

}  // namespace

TEST_CASE("values/faster_rcnn_rotated: four finite losses, equal to the blocks composed, and (D, 5) detections") {
  Generator init(3);
  FasterRCNN model(test::tiny_rotated_detector_config(), &init);
  model.to(kFloat64);
  CHECK(model.rpn->head->bbox_pred->weight.size(0) == 5 * 6);  // 5 deltas x (2 sizes x 3 angles)
  CHECK(model.roi_heads->box_head->bbox_pred->weight.size(0) == 5 * 3);  // 5 deltas x (2 classes + background)
  const Tensor anchors = model.rpn->anchors({32, 32}, zeros({2, 4, 4, 4}, kFloat64));
  CHECK(anchors.sizes() == Shape{4 * 4 * 6, 5});
  const test::TinyBatch b = test::tiny_rotated_batch(4);

  Generator gen(5);
  const Losses losses = model.forward_train(b.images, b.boxes, b.labels, b.sizes, &gen);
  REQUIRE(losses.size() == 4);
  for (const auto& [name, loss] : losses) {
    CAPTURE(name);
    CHECK(loss.dim() == 0);
    CHECK(std::isfinite(value(loss)));
    CHECK(value(loss) >= 0.0);
  }
  CHECK(value(losses.at("loss_rpn_box_reg")) > 0.0);  // the objects have positive anchors
  CHECK(value(losses.at("loss_box_reg")) > 0.0);      // and positive RoIs (the ground truth at least)
  const double total = value(FasterRCNN::total_loss(losses));

  // A loader's batch: the model trains on its rotated boxes (batch.boxes are the hulls, and unused).
  data::Batch batch;
  batch.images = b.images;
  batch.boxes = {zeros({2, 4}, kFloat64), zeros({0, 4}, kFloat64)};
  batch.rotated_boxes = b.boxes;
  batch.labels = b.labels;
  batch.image_sizes = b.sizes;
  batch.image_ids = {0, 1};
  batch.indices = {0, 1};
  Generator same(5);
  CHECK(value(FasterRCNN::total_loss(model.forward_train(batch, &same))) == total);

  const models::PaddedProposals proposals = test::rpn_proposals_of(model, b, 5);
  CHECK(proposals.boxes.size(2) == 5);
  CHECK(value(test::composed_loss(model, b, proposals, 5)) == doctest::Approx(total).epsilon(1e-12));

  FasterRCNN::total_loss(losses).backward();
  for (const char* part : {"backbone.stem", "offset_conv.weight", "rpn.head.bbox_pred", "roi_heads.box_head.bbox_pred"}) {
    double norm = 0.0;
    for (const auto& [name, p] : model.named_parameters())
      if (name.find(part) != std::string::npos) norm += value(sum(mul(p.grad(), p.grad())));
    CAPTURE(part);
    CHECK(norm > 0.0);
  }

  // Inference: rotated boxes with their angle in range, labels in 1..C.
  model.eval();
  const auto detections = model.forward_infer(b.images, b.sizes);
  REQUIRE(detections.size() == 2);
  for (const auto& d : detections) {
    CHECK(d.boxes.dim() == 2);
    CHECK(d.boxes.size(1) == 5);
    CHECK(d.scores.size(0) == d.boxes.size(0));
    const std::vector<double> rows = d.boxes.to_vector<double>();
    for (size_t i = 0; i < rows.size(); i += 5) {
      CHECK(rows[i + 2] > 0);
      CHECK(rows[i + 3] > 0);
      CHECK(rows[i + 4] >= -kPi / 2 - 1e-12);
      CHECK(rows[i + 4] < kPi / 2 + 1e-12);
    }
    for (int64_t label : d.labels.to_vector<int64_t>()) CHECK((label >= 1 && label <= 2));
  }
}

TEST_CASE("values/faster_rcnn_rotated: at angle 0 the rotated RPN's matching is the axis-aligned one") {
  // With anchors at angle 0 only and boxes at angle 0, rotated IoU equals axis-aligned IoU (up to rounding),
  // so both detectors label the same anchors and sample the same rows: the objectness losses agree.
  DetectorConfig rotated = test::tiny_detector_config(), axis = test::tiny_detector_config();
  rotated.box_type = models::BoxType::kRotated;
  rotated.rpn.anchor_angles_degrees = {0};
  Generator init_a(6), init_r(6);
  FasterRCNN a(axis, &init_a), r(rotated, &init_r);
  a.to(kFloat64);
  r.to(kFloat64);
  const test::TinyBatch b = test::tiny_batch(7);
  std::vector<Tensor> turned;
  for (const Tensor& xyxy : b.boxes) {
    const Tensor x1 = xyxy.narrow(1, 0, 1), y1 = xyxy.narrow(1, 1, 1), x2 = xyxy.narrow(1, 2, 1), y2 = xyxy.narrow(1, 3, 1);
    turned.push_back(cat({mul(add(x1, x2), 0.5), mul(add(y1, y2), 0.5), sub(x2, x1), sub(y2, y1), mul(x1, 0.0)}, 1));
  }
  Generator ga(8), gr(8);
  const Losses la = a.forward_train(b.images, b.boxes, b.labels, b.sizes, &ga);
  const Losses lr = r.forward_train(b.images, turned, b.labels, b.sizes, &gr);
  CHECK(value(lr.at("loss_objectness")) == doctest::Approx(value(la.at("loss_objectness"))).epsilon(1e-12));
}

TEST_CASE("gradcheck/faster_rcnn_rotated: the total training loss against parameters of every part") {
  // As gradcheck/faster_rcnn: the proposals held fixed, the samplers reseeded at every evaluation.
  Generator init(11);
  FasterRCNN model(test::tiny_rotated_detector_config(), &init);
  test::perturb_offset_predictors(model, 12);
  model.to(kFloat64);
  const test::TinyBatch b = test::tiny_rotated_batch(13);
  const models::PaddedProposals proposals = test::rpn_proposals_of(model, b, 14);
  REQUIRE(proposals.counts.to_vector<int64_t>()[0] > 0);

  autograd::TensorList inputs;
  std::vector<std::string> names;
  Generator pick(15);
  for (const auto& [name, p] : model.named_parameters()) {
    const bool always = name.find("offset_conv") != std::string::npos || name.find("bbox_pred") != std::string::npos;
    if (!always && pick.next_uniform() > 0.5) continue;
    inputs.push_back(p);
    names.push_back(name);
  }
  for (const char* part : {"backbone.", "rpn.head.bbox_pred", "roi_heads.box_head.bbox_pred", "offset_conv"})
    CHECK(std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.find(part) != std::string::npos; }));

  autograd::GradcheckOptions options;
  options.per_element_limit = 5000;
  const auto result = autograd::gradcheck(
      [&](const autograd::TensorList&) { return test::composed_loss(model, b, proposals, 14); }, inputs, options);
  MESSAGE(result.report);
  CHECK_MESSAGE(result.ok, result.report);
  CHECK(result.entries_checked > 0);
}

TEST_CASE("values/faster_rcnn_rotated_overfit: two images of rotated shapes, every object found at rotated IoU 0.5") {
  // Objects at least 4 pixels thick: a 2-pixel bar needs its centre within a fraction of a pixel for rotated
  // IoU 0.5, more than 250 steps teach.
  data::RotatedShapesOptions shapes;
  shapes.noise_amplitude = 0;
  shapes.min_thickness = 4;
  const data::RotatedShapesDataset dataset(data::Split::kTrain, shapes);
  std::vector<data::Sample> samples;
  std::vector<int64_t> indices;
  for (int64_t i = 0; samples.size() < 2; ++i) {
    data::Sample s = dataset.get(i);
    if (s.rotated_boxes.size() < 2) continue;
    samples.push_back(std::move(s));
    indices.push_back(i);
  }
  const data::Batch batch = data::collate(samples, indices);

  DetectorConfig config;
  config.box_type = models::BoxType::kRotated;
  config.backbone.widths = {16, 32, 64, 64};
  config.roi_heads.representation_size = 64;
  config.backbone.norm = models::NormKind::FrozenBatchNorm;
  // The shipped rotated recipe (examples/configs/rotated_shapes.json): stride-4 features, horizontal
  // anchors matched by bounding boxes, edge swap.
  config.backbone.strides = {1, 2, 1, 1};
  config.rpn.anchor_sizes = {12, 24, 40};
  config.rpn.aspect_ratios = {0.5, 1.0, 2.0};
  config.rpn.anchor_angles_degrees = {0.0};
  config.rpn.loss.match_bounding_boxes = true;
  config.rotated_edge_swap = true;
  Generator init(21);
  FasterRCNN model(config, &init);
  const test::LossDrop loss = test::overfit(model, batch, 250, 2e-3, 22);
  MESSAGE("loss " << loss.first << " -> " << loss.last);
  CHECK(loss.last < 0.25 * loss.first);

  model.eval();
  const std::vector<double> best =
      test::best_overlaps(batch, batch.rotated_boxes, model.forward_infer(batch), box_iou_rotated);
  REQUIRE(best.size() >= 4);
  std::string overlaps;
  for (double iou : best) overlaps += " " + std::to_string(iou).substr(0, 5);
  MESSAGE("best rotated IoU per object:" << overlaps);
  for (size_t m = 0; m < best.size(); ++m) {
    CAPTURE(m);
    CHECK(best[m] > 0.5);
  }
}

TEST_CASE("errors/faster_rcnn_rotated: rotated targets are refused by name") {
  Generator init(31);
  FasterRCNN model(test::tiny_rotated_detector_config(), &init);
  const Tensor images = rand({1, 3, 32, 32}, kFloat32, &init);
  const std::vector<Tensor> labels = {from_vector<int64_t>({1}, {1})};
  auto train = [&](std::vector<float> box) {
    return model.forward_train(images, {from_vector<float>(box, {1, static_cast<int64_t>(box.size())})}, labels);
  };
  CHECK_NOTHROW(train({16, 16, 10, 4, 0.3f}));
  CHECK_NOTHROW(train({31, 1, 30, 4, 1.0f}));  // reaching past the border is fine: the centre is inside
  CHECK_THROWS_CONTAINING(train({2, 2, 20, 20}), "expected boxes[0] of shape (M, 5) (cx, cy, w, h, angle)");
  CHECK_THROWS_CONTAINING(train({16, 16, 0, 4, 0}), "is empty: expected w > 0 and h > 0");
  CHECK_THROWS_CONTAINING(train({16, 16, 10, -1, 0}), "is empty: expected w > 0 and h > 0");
  CHECK_THROWS_CONTAINING(train({16, 16, 10, 4, std::nanf("")}), "is not finite");
  CHECK_THROWS_CONTAINING(train({40, 16, 10, 4, 0}), "has its centre outside the image of 32 x 32");
  // A loader's batch gives the model its rotated boxes; they must be there.
  data::Batch batch;
  batch.images = images;
  batch.boxes = {from_vector<float>({2, 2, 20, 20}, {1, 4})};
  batch.labels = labels;
  batch.image_sizes = {{32, 32}};
  CHECK_THROWS_CONTAINING(model.forward_train(batch), "one boxes and one labels tensor per image (1), got 0 and 1");
  batch.rotated_boxes = {from_vector<float>({16, 16, 10, 4, 0.3f}, {1, 5})};
  CHECK_NOTHROW(model.forward_train(batch));

  DetectorConfig bad = test::tiny_rotated_detector_config();
  bad.rpn.anchor_angles_degrees.clear();
  CHECK_THROWS_CONTAINING(FasterRCNN(bad), "rpn.anchor_angles_degrees must be a non-empty list for rotated boxes");
  bad = test::tiny_rotated_detector_config();
  bad.roi_heads.box_coder_angle_weight = 0;
  CHECK_THROWS_CONTAINING(FasterRCNN(bad), "roi_heads.box_coder_angle_weight must be positive");
}

MINIDET_CUDA_TEST_CASE("cuda/faster_rcnn_rotated: losses and gradients match the CPU, with no host synchronisation") {
  Generator init_cpu(41), init_gpu(41);
  FasterRCNN cpu(test::tiny_rotated_detector_config(), &init_cpu), gpu(test::tiny_rotated_detector_config(), &init_gpu);
  test::perturb_offset_predictors(cpu, 42);
  test::perturb_offset_predictors(gpu, 42);
  cpu.to(kFloat64);
  gpu.to(kFloat64);
  gpu.to(Device::cuda());
  const test::TinyBatch b = test::tiny_rotated_batch(43);

  Generator gen_cpu(44), gen_gpu(44);
  const Losses on_cpu = cpu.forward_train(b.images, b.boxes, b.labels, b.sizes, &gen_cpu);
  const Tensor images_gpu = b.images.to(Device::cuda());
  const TransferCounts before = transfer_counts();
  const Losses on_gpu = gpu.forward_train(images_gpu, b.boxes, b.labels, b.sizes, &gen_gpu);
  FasterRCNN::total_loss(on_gpu).backward();
  const TransferCounts step = transfer_counts() - before;
  MESSAGE("one rotated training step on CUDA: " << step.device_to_host << " device-to-host and "
                                                << step.host_to_device << " host-to-device copies");
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

  // Inference on both devices finds the same boxes.
  cpu.eval();
  gpu.eval();
  const auto d_cpu = cpu.forward_infer(b.images, b.sizes);
  const auto d_gpu = gpu.forward_infer(images_gpu, b.sizes);
  for (size_t n = 0; n < d_cpu.size(); ++n) {
    REQUIRE(d_gpu[n].boxes.sizes() == d_cpu[n].boxes.sizes());
    CHECK(test::allclose(d_gpu[n].boxes.to(Device::cpu()), d_cpu[n].boxes, 1e-7, 1e-7));
    CHECK(d_gpu[n].labels.to(Device::cpu()).to_vector<int64_t>() == d_cpu[n].labels.to_vector<int64_t>());
  }
}
