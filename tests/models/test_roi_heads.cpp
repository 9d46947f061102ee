// RoI heads: hand-made target assignment and sampling, loss values and gradients by hand, the box head,
// gradient checks, CUDA against the CPU, and errors.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "models/roi_heads/roi_heads.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/shape.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using minidet::test::allclose;
using minidet::test::max_abs_diff;
using models::BoxHead;
using models::BoxHeadOutput;
using models::RoIHeadsOptions;
using models::RoISample;

namespace {

// Image 0: objects A = (0, 0, 10, 10) of class 2 and B = (20, 20, 30, 30) of class 1, and four proposals:
//   p0 = (0, 0, 10, 5)    IoU with A 50/100 = 0.5 (foreground: the threshold counts)   class 2
//   p1 = (20, 20, 30, 28) IoU with B 80/100 = 0.8                                        class 1
//   p2 = (0, 0, 10, 4)    IoU with A 0.4: background
//   p3 = (40, 40, 50, 50) no overlap: background
// Image 1: no objects, two proposals.
struct HandCase {
  std::vector<Tensor> proposals, gt_boxes, gt_labels;
};

HandCase hand_case(DType dtype = kFloat64, Device device = Device::cpu()) {
  const TensorOptions o(dtype, device);
  HandCase c;
  c.proposals = {from_vector<double>({0, 0, 10, 5, 20, 20, 30, 28, 0, 0, 10, 4, 40, 40, 50, 50}, {4, 4}).to(o),
                 from_vector<double>({1, 1, 5, 5, 2, 2, 9, 9}, {2, 4}).to(o)};
  c.gt_boxes = {from_vector<double>({0, 0, 10, 10, 20, 20, 30, 30}, {2, 4}).to(o), zeros({0, 4}, o)};
  c.gt_labels = {from_vector<int64_t>({2, 1}).to(device), zeros({0}, TensorOptions(kInt64, device))};
  return c;
}

RoIHeadsOptions tiny_options() {
  RoIHeadsOptions o;
  o.in_channels = 2;
  o.num_classes = 2;
  o.feature_stride = 4;
  o.representation_size = 6;
  return o;
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }
std::vector<bool> bools(const Tensor& t) { return t.to_vector<bool>(); }

double smooth_l1(double d, double beta) {
  const double a = std::abs(d);
  return a < beta ? 0.5 * d * d / beta : a - 0.5 * beta;
}

}  // namespace

TEST_CASE("values/roi_heads: target assignment appends the ground truth and encodes with weights 10 10 5 5") {
  const HandCase c = hand_case();
  Generator gen(1);
  const RoISample s = models::sample_rois(c.proposals, c.gt_boxes, c.gt_labels, tiny_options(), &gen);
  // Image 0: 4 proposals + 2 objects, everything sampled (2 + 2 positives <= 32, 2 negatives), in index order;
  // image 1: its 2 proposals, both background.
  REQUIRE(s.rois.sizes() == Shape({8, 5}));
  CHECK(values(s.rois) == std::vector<double>{0, 0, 0, 10, 5,   0, 20, 20, 30, 28, 0, 0, 0, 10, 4,
                                              0, 40, 40, 50, 50, 0, 0, 0, 10, 10,  0, 20, 20, 30, 30,
                                              1, 1, 1, 5, 5,      1, 2, 2, 9, 9});
  CHECK(ints(s.labels) == std::vector<int64_t>{2, 1, 0, 0, 2, 1, 0, 0});
  CHECK(bools(s.valid) == std::vector<bool>(8, true));
  // p0 against A: same width and x centre, centre y 2.5 -> 5, height 5 -> 10:
  //   dy = 10 * 2.5 / 5 = 5, dh = 5 log 2.  p1 against B: dy = 10 * 1 / 8, dh = 5 log(10 / 8).
  std::vector<double> expected(8 * 4, 0.0);
  expected[1] = 5.0;
  expected[3] = 5.0 * std::log(2.0);
  expected[5] = 1.25;
  expected[7] = 5.0 * std::log(1.25);
  const std::vector<double> targets = values(s.regression_targets);
  for (size_t i = 0; i < expected.size(); ++i) CHECK(targets[i] == doctest::Approx(expected[i]).epsilon(1e-14));
}

TEST_CASE("values/roi_heads: sampling fills fixed slots and marks the rest invalid") {
  // Batch 4 at 0.25: one positive of the four, and both negatives (fewer than the 3 allowed). Image 0 has
  // 6 candidates, so K = 4 slots with 3 sampled: the last slot is padding (invalid, label 0, target 0).
  const HandCase c = hand_case();
  RoIHeadsOptions o = tiny_options();
  o.batch_size_per_image = 4;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    Generator gen(seed);
    const RoISample s = models::sample_rois(c.proposals, c.gt_boxes, c.gt_labels, o, &gen);
    REQUIRE(s.rois.size(0) == 4 + 2);  // image 1 has 2 candidates: min(4, 2) slots
    const std::vector<int64_t> labels = ints(s.labels);
    const std::vector<bool> valid = bools(s.valid);
    const std::vector<double> rois = values(s.rois);
    CHECK(valid == std::vector<bool>{true, true, true, false, true, true});
    CHECK(labels[3] == 0);
    CHECK(values(select(s.regression_targets, 0, 3)) == std::vector<double>(4, 0.0));
    int64_t positives = 0;
    for (int k = 0; k < 3; ++k) positives += labels[k] > 0;
    CHECK(positives == 1);
    // The sampled rows in increasing candidate order (the positive is one of candidates 0, 1, 4, 5, so it may
    // come before or after the negatives p2 and p3), both negatives among them.
    const double p2_y2 = 4, p3_x1 = 40;
    int negatives_seen = 0;
    for (int k = 0; k < 3; ++k) negatives_seen += (rois[5 * k + 4] == p2_y2) + (rois[5 * k + 1] == p3_x1);
    CHECK(negatives_seen == 2);
    CHECK(rois[5 * 4] == 1.0);  // image 1's rows carry batch index 1
  }
}

TEST_CASE("values/roi_heads: between two thresholds a candidate is ignored and never sampled") {
  // fg 0.5, bg 0.3: p2 (IoU 0.4) is ignored, so image 0 has 5 sampleable candidates in 6 slots.
  const HandCase c = hand_case();
  RoIHeadsOptions o = tiny_options();
  o.bg_iou_threshold = 0.3;
  Generator gen(2);
  const RoISample s = models::sample_rois(c.proposals, c.gt_boxes, c.gt_labels, o, &gen);
  REQUIRE(s.rois.size(0) == 8);
  // Sampled in index order: p0, p1, p3, A, B, then p2 as padding.
  CHECK(bools(s.valid) == std::vector<bool>{true, true, true, true, true, false, true, true});
  CHECK(ints(s.labels) == std::vector<int64_t>{2, 1, 0, 2, 1, 0, 0, 0});
  CHECK(values(select(s.rois, 0, 2)) == std::vector<double>{0, 40, 40, 50, 50});
  CHECK(values(select(s.rois, 0, 5)) == std::vector<double>{0, 0, 0, 10, 4});
}

TEST_CASE("values/roi_heads: images without proposals or objects give empty samples") {
  const TensorOptions o(kFloat32);
  Generator gen(3);
  const RoISample s = models::sample_rois({zeros({0, 4}, o)}, {zeros({0, 4}, o)}, {zeros({0}, kInt64)},
                                          tiny_options(), &gen);
  CHECK(s.rois.sizes() == Shape({0, 5}));
  CHECK(s.labels.sizes() == Shape{0});
  CHECK(s.regression_targets.sizes() == Shape({0, 4}));
  CHECK(s.valid.dtype() == kBool);
  // The losses of nothing are 0, not NaN.
  const BoxHeadOutput head{zeros({0, 3}, o).requires_grad_(), zeros({0, 12}, o).requires_grad_()};
  const auto losses = models::roi_heads_loss(head, s);
  CHECK(losses.at("loss_classifier").item<double>() == 0.0);
  CHECK(losses.at("loss_box_reg").item<double>() == 0.0);
}

TEST_CASE("values/roi_heads: losses and their gradients against a hand computation") {
  // Three rows, C = 2: row 0 class 2 (positive), row 1 background, row 2 padding (label 1 but invalid).
  const Tensor logits = from_vector<double>({0.3, -1.2, 2.0, 1.5, 0.2, -0.4, 0.7, 0.1, -2.0}, {3, 3}).requires_grad_();
  std::vector<double> delta_values(3 * 12);
  for (size_t i = 0; i < delta_values.size(); ++i) delta_values[i] = 0.05 * static_cast<double>(i) - 0.6;
  const Tensor deltas = from_vector<double>(delta_values, {3, 12}).requires_grad_();
  RoISample s;
  s.rois = zeros({3, 5}, kFloat64);
  s.labels = from_vector<int64_t>({2, 0, 1});
  s.valid = from_vector<bool>({true, true, false});
  const std::vector<double> target_values = {-0.25, 0.02, 0.5, 0.05, 0, 0, 0, 0, 1, 1, 1, 1};
  s.regression_targets = from_vector<double>(target_values, {3, 4});
  const double beta = 1.0 / 9.0;
  const auto losses = models::roi_heads_loss({logits, deltas}, s, beta);

  // By hand: S = 2 valid rows.
  const std::vector<double> z = values(logits);
  const int64_t labels[3] = {2, 0, 1};
  double ce = 0, softmax[3][3];
  for (int r = 0; r < 3; ++r) {
    double total = 0;
    for (int c = 0; c < 3; ++c) total += std::exp(z[3 * r + c]);
    for (int c = 0; c < 3; ++c) softmax[r][c] = std::exp(z[3 * r + c]) / total;
    if (r < 2) ce += -std::log(softmax[r][labels[r]]);
  }
  double box = 0;
  for (int j = 0; j < 4; ++j) box += smooth_l1(delta_values[4 * 2 + j] - target_values[j], beta);  // row 0, class 2
  CHECK(losses.at("loss_classifier").item<double>() == doctest::Approx(ce / 2).epsilon(1e-12));
  CHECK(losses.at("loss_box_reg").item<double>() == doctest::Approx(box / 2).epsilon(1e-12));

  add(losses.at("loss_classifier"), losses.at("loss_box_reg")).backward();
  const std::vector<double> grad_logits = values(logits.grad()), grad_deltas = values(deltas.grad());
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      const double expected = r < 2 ? (softmax[r][c] - (c == labels[r])) / 2 : 0.0;
      CHECK(grad_logits[3 * r + c] == doctest::Approx(expected).epsilon(1e-12));
    }
  for (int i = 0; i < 3 * 12; ++i) {
    double expected = 0;
    if (i >= 8 && i < 12) {  // row 0, the columns of class 2 only
      const double d = delta_values[i] - target_values[i - 8];
      expected = (std::abs(d) < beta ? d / beta : (d > 0 ? 1.0 : -1.0)) / 2;
    }
    CHECK(grad_deltas[i] == doctest::Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("values/roi_heads: the box head's shapes and parameters") {
  Generator gen(4);
  BoxHead head(2 * 7 * 7, 6, 3, &gen);
  const BoxHeadOutput out = head.forward(randn({5, 2, 7, 7}, kFloat32, &gen));
  CHECK(out.class_logits.sizes() == Shape({5, 4}));
  CHECK(out.box_deltas.sizes() == Shape({5, 16}));
  const BoxHeadOutput empty = head.forward(zeros({0, 2, 7, 7}));
  CHECK(empty.class_logits.sizes() == Shape({0, 4}));
  CHECK(empty.box_deltas.sizes() == Shape({0, 16}));
  std::vector<std::string> names;
  for (const auto& [name, t] : head.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"fc6.weight", "fc6.bias", "fc7.weight", "fc7.bias", "cls_score.weight",
                                          "cls_score.bias", "bbox_pred.weight", "bbox_pred.bias"});
  CHECK(head.num_parameters() == (98 * 6 + 6) + (6 * 6 + 6) + (6 * 4 + 4) + (6 * 16 + 16));
}

TEST_CASE("gradcheck/roi_heads: both losses through the box head's FC layers") {
  const HandCase c = hand_case();
  Generator init(5);
  BoxHead head(2 * 7 * 7, 5, 2, &init);
  head.to(kFloat64);
  TensorList inputs = {test::random_leaf({8, 2, 7, 7}, 6)};
  for (const Tensor& p : head.parameters()) inputs.push_back(p);
  const auto fn = [&](const TensorList& in) {
    Generator gen(7);  // the same sample at every evaluation
    const RoISample s = models::sample_rois(c.proposals, c.gt_boxes, c.gt_labels, tiny_options(), &gen);
    const auto losses = models::roi_heads_loss(head.forward(in[0]), s);
    return stack({losses.at("loss_classifier"), losses.at("loss_box_reg")}, 0);
  };
  const auto result = autograd::gradcheck(fn, inputs);
  MESSAGE(result.report);
  CHECK_MESSAGE(result.ok, result.report);
  CHECK(result.entries_checked > 0);
}

TEST_CASE("errors/roi_heads: sampling and loss inputs") {
  const HandCase c = hand_case();
  const RoIHeadsOptions o = tiny_options();
  CHECK_THROWS_CONTAINING(models::sample_rois({}, {}, {}, o), "expected one proposals tensor per image, got none");
  CHECK_THROWS_CONTAINING(models::sample_rois({zeros({3, 5}, kFloat64)}, {c.gt_boxes[0]}, {c.gt_labels[0]}, o),
                          "expected proposals[0] of shape (P, 4)");
  CHECK_THROWS_CONTAINING(models::sample_rois(c.proposals, {c.gt_boxes[0]}, c.gt_labels, o),
                          "one gt_boxes and one gt_labels tensor per image");
  CHECK_THROWS_CONTAINING(models::sample_rois(c.proposals, {c.gt_boxes[0].to(kFloat32), c.gt_boxes[1]}, c.gt_labels, o),
                          "sample_rois");
  CHECK_THROWS_CONTAINING(
      models::sample_rois(c.proposals, c.gt_boxes, {c.gt_labels[0].to(kFloat64), c.gt_labels[1]}, o),
      "expected int64 gt_labels[0]");
  CHECK_THROWS_CONTAINING(models::sample_rois(c.proposals, c.gt_boxes, {from_vector<int64_t>({1}), c.gt_labels[1]}, o),
                          "expected gt_labels[0] of shape (2)");
  RoIHeadsOptions bad = o;
  bad.batch_size_per_image = 0;
  CHECK_THROWS_CONTAINING(models::sample_rois(c.proposals, c.gt_boxes, c.gt_labels, bad), "batch_size_per_image");

  Generator gen(1);
  const RoISample s = models::sample_rois(c.proposals, c.gt_boxes, c.gt_labels, o, &gen);
  const Tensor logits = zeros({8, 3}, kFloat64), deltas = zeros({8, 12}, kFloat64);
  CHECK_THROWS_CONTAINING(models::roi_heads_loss({zeros({8, 1}, kFloat64), deltas}, s), "C >= 1");
  CHECK_THROWS_CONTAINING(models::roi_heads_loss({logits, zeros({8, 8}, kFloat64)}, s),
                          "expected box_deltas of shape (8, 12)");
  CHECK_THROWS_CONTAINING(models::roi_heads_loss({zeros({7, 3}, kFloat64), zeros({7, 12}, kFloat64)}, s),
                          "sample labels of shape (7)");
  CHECK_THROWS_CONTAINING(models::roi_heads_loss({logits.to(kFloat32), deltas.to(kFloat32)}, s), "regression_targets");
}

TEST_CASE("errors/roi_heads: target values") {
  const HandCase c = hand_case();
  CHECK_NOTHROW(models::check_roi_targets(c.gt_boxes, c.gt_labels, 2));
  CHECK_THROWS_CONTAINING(models::check_roi_targets(c.gt_boxes, c.gt_labels, 1),
                          "expected gt_labels[0] in 1..1 (0 is background), got 2 at index 0");
  CHECK_THROWS_CONTAINING(models::check_roi_targets(c.gt_boxes, {from_vector<int64_t>({1, 0}), c.gt_labels[1]}, 2),
                          "got 0 at index 1");
  const Tensor inverted = from_vector<double>({0, 0, 10, 10, 20, 30, 30, 20}, {2, 4});
  CHECK_THROWS_CONTAINING(models::check_roi_targets({inverted, c.gt_boxes[1]}, c.gt_labels, 2),
                          "expected gt_boxes[0] finite with x1 < x2 and y1 < y2, got box 1");
  const Tensor infinite = from_vector<double>({0, 0, INFINITY, 10, 20, 20, 30, 30}, {2, 4});
  CHECK_THROWS_CONTAINING(models::check_roi_targets({infinite, c.gt_boxes[1]}, c.gt_labels, 2), "got box 0");
  const Tensor not_a_number = from_vector<double>({0, 0, 10, 10, 20, NAN, 30, 30}, {2, 4});
  CHECK_THROWS_CONTAINING(models::check_roi_targets({not_a_number, c.gt_boxes[1]}, c.gt_labels, 2), "got box 1");
}

TEST_CASE("errors/roi_heads: box head inputs and options") {
  CHECK_THROWS_CONTAINING(BoxHead(98, 6, 0), "at least one object class");
  CHECK_THROWS_CONTAINING(BoxHead(0, 6, 2), "must be positive");
  BoxHead head(98, 6, 2);
  CHECK_THROWS_CONTAINING(head.forward(zeros({3, 2, 7, 6})), "with 98 features per RoI");
  CHECK_THROWS_CONTAINING(head.forward(zeros({3, 98}, kInt64)), "BoxHead");
}

MINIDET_CUDA_TEST_CASE("cuda/roi_heads: sampling and the losses with their gradients match the CPU") {
  // A larger random case: 3 images, 300 random proposals each around 6 objects, so the sampler's quota binds.
  Generator data(11);
  std::vector<Tensor> proposals, gt_boxes, gt_labels;
  for (int64_t n = 0; n < 3; ++n) {
    const Tensor corner = mul(rand({300, 2}, kFloat32, &data), 80.0);
    proposals.push_back(cat({corner, add(corner, add(mul(rand({300, 2}, kFloat32, &data), 30.0), 4.0))}, 1));
    const Tensor gt_corner = mul(rand({6, 2}, kFloat32, &data), 80.0);
    gt_boxes.push_back(cat({gt_corner, add(gt_corner, add(mul(rand({6, 2}, kFloat32, &data), 30.0), 8.0))}, 1));
    gt_labels.push_back(randint(1, 4, {6}, kInt64, &data));
  }
  gt_boxes[2] = zeros({0, 4}, kFloat32);  // one image without objects
  gt_labels[2] = zeros({0}, kInt64);
  RoIHeadsOptions o = tiny_options();
  o.num_classes = 3;
  o.batch_size_per_image = 64;
  auto to_cuda = [](std::vector<Tensor> v) {
    for (Tensor& t : v) t = t.cuda();
    return v;
  };
  Generator cpu_gen(12), gpu_gen(12);
  const RoISample on_cpu = models::sample_rois(proposals, gt_boxes, gt_labels, o, &cpu_gen);
  const RoISample on_gpu = models::sample_rois(to_cuda(proposals), to_cuda(gt_boxes), to_cuda(gt_labels), o, &gpu_gen);
  REQUIRE(on_gpu.rois.is_cuda());
  CHECK(values(on_gpu.rois) == values(on_cpu.rois));  // one-hot gathers are exact on both devices
  CHECK(ints(on_gpu.labels) == ints(on_cpu.labels));
  CHECK(bools(on_gpu.valid) == bools(on_cpu.valid));
  CHECK(allclose(on_gpu.regression_targets.cpu(), on_cpu.regression_targets, 1e-5, 1e-5));  // log: ulps apart

  const int64_t rows = on_cpu.rois.size(0);
  Generator g(13);
  const Tensor logits = randn({rows, 4}, kFloat32, &g), deltas = mul(randn({rows, 16}, kFloat32, &g), 0.5);
  TensorList results[2];
  for (int device = 0; device < 2; ++device) {
    const Tensor z = (device ? logits.cuda() : logits.clone()).requires_grad_();
    const Tensor d = (device ? deltas.cuda() : deltas.clone()).requires_grad_();
    const auto losses = models::roi_heads_loss({z, d}, device ? on_gpu : on_cpu);
    add(losses.at("loss_classifier"), losses.at("loss_box_reg")).backward();
    results[device] = {losses.at("loss_classifier").cpu(), losses.at("loss_box_reg").cpu(), z.grad().cpu(),
                       d.grad().cpu()};
  }
  for (size_t i = 0; i < 4; ++i) CHECK(allclose(results[1][i], results[0][i], 1e-4, 1e-6));
}
