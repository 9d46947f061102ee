// RoI heads, the parts: hand-made target assignment and sampling, loss values and gradients by hand, the
// box head, gradient checks, inference, CUDA against the CPU, and errors. The assembled module:
// test_roi_heads_module.cpp.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "models/common/padded_proposals.h"
#include "models/roi_heads/roi_heads.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/shape.h"
#include "tests/models/roi_heads_helpers.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using minidet::test::allclose;
using minidet::test::bools;
using minidet::test::hand_case;
using minidet::test::HandCase;
using minidet::test::ints;
using minidet::test::values;
using models::BoxHead;
using models::BoxHeadOutput;
using models::RoIHeadsOptions;
using models::RoISample;

namespace {

double smooth_l1(double d, double beta) {
  const double a = std::abs(d);
  return a < beta ? 0.5 * d * d / beta : a - 0.5 * beta;
}

}  // namespace

TEST_CASE("values/roi_heads: target assignment appends the ground truth and encodes with weights 10 10 5 5") {
  const HandCase c = hand_case();
  Generator gen(1);
  const RoISample s = models::sample_rois(c.proposals, c.gt_boxes, c.gt_labels, test::tiny_roi_heads_options(), &gen);
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
  RoIHeadsOptions o = test::tiny_roi_heads_options();
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
  RoIHeadsOptions o = test::tiny_roi_heads_options();
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

TEST_CASE("values/roi_heads: sampling a batch gives each image the rows it gets alone") {
  // sample_rois matches all images at once, their candidates and objects padded: that must change nothing.
  // With slots for every candidate (batch 1000 at fraction 1) each non-ignored candidate is sampled whatever
  // the generator draws, so each image's rows must equal a call with that image alone. Images: 7 proposals
  // and 2 objects; 4 proposals and none; none and 1 object; 12 proposals and 3 objects.
  Generator data(5);
  const auto random_boxes = [&](int64_t m) {
    const Tensor corner = rand({m, 2}, kFloat32, &data) * 60.0;
    return cat({corner, corner + rand({m, 2}, kFloat32, &data) * 30.0 + 4.0}, 1);
  };
  std::vector<Tensor> proposals, gt, labels;
  for (const auto& [p, m] : std::vector<std::pair<int64_t, int64_t>>{{7, 2}, {4, 0}, {0, 1}, {12, 3}}) {
    gt.push_back(random_boxes(m));
    // Some proposals near the objects (foreground), the rest anywhere.
    if (m == 0) {
      proposals.push_back(random_boxes(p));
    } else {
      const Tensor near_first_object = add(gt.back().narrow(0, 0, 1).expand({p / 2, 4}), 1.0);
      proposals.push_back(cat({random_boxes(p - p / 2), near_first_object}, 0));
    }
    labels.push_back(from_vector<int64_t>(std::vector<int64_t>(static_cast<size_t>(m), 1 + m % 3)));
  }
  RoIHeadsOptions o = test::tiny_roi_heads_options();
  o.batch_size_per_image = 1000;
  o.positive_fraction = 1.0;
  Generator gen(7);
  const RoISample batch = models::sample_rois(proposals, gt, labels, o, &gen);
  int64_t row = 0, foreground = 0;
  for (size_t i = 0; i < gt.size(); ++i) {
    CAPTURE(i);
    const RoISample alone = models::sample_rois({proposals[i]}, {gt[i]}, {labels[i]}, o, &gen);
    const int64_t k = alone.rois.size(0);
    REQUIRE(row + k <= batch.rois.size(0));
    CHECK(values(batch.rois.narrow(0, row, k).narrow(1, 0, 1)) == std::vector<double>(k, static_cast<double>(i)));
    CHECK(values(batch.rois.narrow(0, row, k).narrow(1, 1, 4)) == values(alone.rois.narrow(1, 1, 4)));
    CHECK(ints(batch.labels.narrow(0, row, k)) == ints(alone.labels));
    CHECK(bools(batch.valid.narrow(0, row, k)) == bools(alone.valid));
    CHECK(values(batch.regression_targets.narrow(0, row, k)) == values(alone.regression_targets));
    for (int64_t label : ints(alone.labels)) foreground += label > 0;
    row += k;
  }
  CHECK(row == batch.rois.size(0));
  CHECK(foreground >= 6);  // the objects themselves at least: the comparison covers foreground rows
  // With few slots the sample is random, but how many rows are valid is not (min(quota, available) per
  // kind): padding must never take a slot.
  // Batch 1 gives every image exactly one slot: the tables need no cutting per image.
  for (const int64_t slots : {6, 1}) {
    CAPTURE(slots);
    o.batch_size_per_image = slots;
    o.positive_fraction = 0.25;
    const RoISample small = models::sample_rois(proposals, gt, labels, o, &gen);
    row = 0;
    for (size_t i = 0; i < gt.size(); ++i) {
      CAPTURE(i);
      const RoISample alone = models::sample_rois({proposals[i]}, {gt[i]}, {labels[i]}, o, &gen);
      const int64_t k = alone.rois.size(0);
      const auto count = [](const std::vector<bool>& v) { return std::count(v.begin(), v.end(), true); };
      CHECK(count(bools(small.valid.narrow(0, row, k))) == count(bools(alone.valid)));
      CHECK(values(small.rois.narrow(0, row, k).narrow(1, 0, 1)) == std::vector<double>(k, static_cast<double>(i)));
      row += k;
    }
    CHECK(row == small.rois.size(0));
  }
}

TEST_CASE("values/roi_heads: padded proposals sample the rows of per-image proposals") {
  // sample_rois_padded reads image n's proposals as the first counts[n] slots of a (N, P, 4) table, with
  // junk after them. With slots for every candidate each non-ignored candidate is sampled whatever the
  // draws, so its valid rows must be the per-image path's, image by image and in the same order; the junk
  // must never be sampled, and the rows past each image's sample are padding.
  Generator data(9);
  const auto random_boxes = [&](int64_t m) {
    const Tensor corner = rand({m, 2}, kFloat64, &data) * 60.0;
    return cat({corner, corner + rand({m, 2}, kFloat64, &data) * 30.0 + 4.0}, 1);
  };
  const int64_t slots = 9;
  std::vector<Tensor> proposals, gt, labels, rows;
  std::vector<int64_t> counts;
  for (const auto& [p, m] : std::vector<std::pair<int64_t, int64_t>>{{7, 2}, {0, 1}, {9, 0}, {3, 3}}) {
    gt.push_back(random_boxes(m));
    proposals.push_back(m > 0 ? cat({random_boxes(p - p / 2), add(gt.back().narrow(0, 0, 1).expand({p / 2, 4}), 1.0)}, 0)
                              : random_boxes(p));
    labels.push_back(from_vector<int64_t>(std::vector<int64_t>(static_cast<size_t>(m), 1 + m % 3)));
    // Junk past the count: copies of the objects, which would be foreground if they were ever sampled.
    Tensor junk = random_boxes(slots - p);
    if (m > 0 && slots - p > 0) junk = add(gt.back().narrow(0, 0, 1).expand({slots - p, 4}), 0.5);
    rows.push_back(cat({proposals.back(), junk}, 0));
    counts.push_back(p);
  }
  RoIHeadsOptions o = test::tiny_roi_heads_options();
  o.batch_size_per_image = 1000;
  o.positive_fraction = 1.0;
  Generator gen(3);
  const models::PaddedProposals padded{stack(rows, 0), from_vector<int64_t>(counts)};
  const RoISample table = models::sample_rois_padded(padded, gt, labels, o, &gen);
  const int64_t k = table.rois.size(0) / 4;  // every image keeps K = min(batch, P + Mw) rows
  REQUIRE(k * 4 == table.rois.size(0));
  CHECK(k == slots + 3);
  for (size_t i = 0; i < gt.size(); ++i) {
    CAPTURE(i);
    const RoISample alone = models::sample_rois({proposals[i]}, {gt[i]}, {labels[i]}, o, &gen);
    const std::vector<bool> valid = bools(table.valid.narrow(0, static_cast<int64_t>(i) * k, k));
    const int64_t sampled = std::count(valid.begin(), valid.end(), true);
    const std::vector<bool> alone_valid = bools(alone.valid);
    CHECK(sampled == std::count(alone_valid.begin(), alone_valid.end(), true));
    // Sampled rows come first, in candidate order, in both paths.
    const RoISample mine{table.rois.narrow(0, static_cast<int64_t>(i) * k, sampled),
                         table.labels.narrow(0, static_cast<int64_t>(i) * k, sampled),
                         table.regression_targets.narrow(0, static_cast<int64_t>(i) * k, sampled),
                         table.valid.narrow(0, static_cast<int64_t>(i) * k, sampled)};
    CHECK(values(mine.rois.narrow(1, 0, 1)) == std::vector<double>(sampled, static_cast<double>(i)));
    CHECK(values(mine.rois.narrow(1, 1, 4)) == values(alone.rois.narrow(0, 0, sampled).narrow(1, 1, 4)));
    CHECK(ints(mine.labels) == ints(alone.labels.narrow(0, 0, sampled)));
    CHECK(values(mine.regression_targets) == values(alone.regression_targets.narrow(0, 0, sampled)));
    CHECK(std::all_of(valid.begin() + sampled, valid.end(), [](bool v) { return !v; }));
  }
  CHECK_THROWS_CONTAINING(models::sample_rois_padded({zeros({2, 3}), from_vector<int64_t>({1, 1})}, gt, labels, o),
                          "expected padded proposals of shape (N, P, 4)");
  CHECK_THROWS_CONTAINING(models::sample_rois_padded({stack(rows, 0), from_vector<int64_t>({1, 1})}, gt, labels, o),
                          "expected int64 proposal counts of shape (4)");
}

TEST_CASE("values/roi_heads: images without proposals or objects give empty samples") {
  const TensorOptions o(kFloat32);
  Generator gen(3);
  const RoISample s = models::sample_rois({zeros({0, 4}, o)}, {zeros({0, 4}, o)}, {zeros({0}, kInt64)},
                                          test::tiny_roi_heads_options(), &gen);
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
    const RoISample s = models::sample_rois(c.proposals, c.gt_boxes, c.gt_labels, test::tiny_roi_heads_options(), &gen);
    const auto losses = models::roi_heads_loss(head.forward(in[0]), s);
    return stack({losses.at("loss_classifier"), losses.at("loss_box_reg")}, 0);
  };
  const auto result = autograd::gradcheck(fn, inputs);
  MESSAGE(result.report);
  CHECK_MESSAGE(result.ok, result.report);
  CHECK(result.entries_checked > 0);
}

namespace {

// Logits whose softmax is exactly the given probabilities (up to rounding): log p.
Tensor logits_of(const std::vector<double>& probabilities, int64_t rows) {
  std::vector<double> z;
  for (double p : probabilities) z.push_back(std::log(p));
  return from_vector<double>(z, {rows, static_cast<int64_t>(probabilities.size()) / rows});
}

}  // namespace

TEST_CASE("values/roi_heads: inference keeps suppresses clips and drops as torchvision does") {
  // Image 0 (40 x 50), C = 2, three proposals; deltas 0 except where said (weights 10 10 5 5: dx = 10 moves a
  // box by one width):
  //   r0 (0, 0, 10, 10)    p = (bg 0.1, c1 0.7, c2 0.2)
  //   r1 (1, 1, 11, 11)    p = (0.36, 0.6, 0.04)  c1 overlaps r0's c1 (IoU 81/119 > 0.5): suppressed;
  //                                               c2 below 0.05: dropped
  //   r2 (30, 30, 40, 40)  p = (0.2, 0.3, 0.5)    c1 moved by dx = 15 to (45, 30, 55, 40), clipped to x2 = 50;
  //                                               c2 moved by dx = 20 to x1 = 50: width 0 after clipping, removed
  // Image 1 (20 x 20) has no proposals: its three slots of the table hold image 0's boxes, scored with
  // confidence (class 1 at 0.9), and its count 0 must drop them all.
  const Tensor proposals = from_vector<double>({0, 0, 10, 10, 1, 1, 11, 11, 30, 30, 40, 40}, {3, 4});
  const Tensor logits =
      logits_of({0.1, 0.7, 0.2, 0.36, 0.6, 0.04, 0.2, 0.3, 0.5, 0.05, 0.9, 0.05, 0.05, 0.9, 0.05, 0.05, 0.9, 0.05}, 6);
  std::vector<double> deltas(6 * 12, 0.0);
  deltas[2 * 12 + 4] = 15;  // r2, class 1, dx
  deltas[2 * 12 + 8] = 20;  // r2, class 2, dx
  const BoxHeadOutput head{logits, from_vector<double>(deltas, {6, 12})};
  const models::PaddedProposals table{stack({proposals, proposals}, 0), from_vector<int64_t>({3, 0})};
  const auto detections =
      models::postprocess_detections(head, table, {{40, 50}, {20, 20}}, test::tiny_roi_heads_options());
  REQUIRE(detections.size() == 2);
  const models::Detections& d = detections[0];
  CHECK(values(d.boxes) == std::vector<double>{0, 0, 10, 10, 45, 30, 50, 40, 0, 0, 10, 10});
  const std::vector<double> scores = values(d.scores);
  REQUIRE(scores.size() == 3);
  CHECK(scores[0] == doctest::Approx(0.7).epsilon(1e-12));
  CHECK(scores[1] == doctest::Approx(0.3).epsilon(1e-12));
  CHECK(scores[2] == doctest::Approx(0.2).epsilon(1e-12));
  CHECK(d.labels.dtype() == kInt64);
  CHECK(ints(d.labels) == std::vector<int64_t>{1, 1, 2});
  CHECK(detections[1].boxes.sizes() == Shape({0, 4}));
  CHECK(detections[1].scores.sizes() == Shape{0});
  CHECK(detections[1].labels.dtype() == kInt64);
}

TEST_CASE("values/roi_heads: inference keeps the best detections per image and never mixes images") {
  // Two images with the same 5 disjoint proposals; image 1's are shifted by nothing, so every box of image 0
  // overlaps its twin in image 1 exactly: only per-image NMS keeps both. With detections_per_image = 3 each
  // image keeps its 3 best, in decreasing score order.
  std::vector<double> boxes;
  for (int i = 0; i < 5; ++i) boxes.insert(boxes.end(), {12.0 * i, 0, 12.0 * i + 10, 10});
  const Tensor proposals = from_vector<double>(boxes, {5, 4});
  // Class 1 probabilities per row: image 0 rising, image 1 falling; class 2 always 0.01 (dropped).
  std::vector<double> p;
  const double image0[5] = {0.5, 0.6, 0.7, 0.8, 0.9}, image1[5] = {0.9, 0.8, 0.7, 0.6, 0.5};
  for (double v : image0) p.insert(p.end(), {0.99 - v, v, 0.01});
  for (double v : image1) p.insert(p.end(), {0.99 - v, v, 0.01});
  const BoxHeadOutput head{logits_of(p, 10), zeros({10, 12}, kFloat64)};
  RoIHeadsOptions o = test::tiny_roi_heads_options();
  o.detections_per_image = 3;
  const auto detections =
      models::postprocess_detections(head, models::pad_proposals({proposals, proposals}), {{20, 70}, {20, 70}}, o);
  REQUIRE(detections.size() == 2);
  CHECK(values(detections[0].scores).size() == 3);
  CHECK(values(detections[0].boxes) == std::vector<double>{48, 0, 58, 10, 36, 0, 46, 10, 24, 0, 34, 10});
  CHECK(values(detections[1].boxes) == std::vector<double>{0, 0, 10, 10, 12, 0, 22, 10, 24, 0, 34, 10});
  CHECK(ints(detections[1].labels) == std::vector<int64_t>{1, 1, 1});
  for (const models::Detections& d : detections)  // views into the two result tables, each one contiguous
    CHECK((d.boxes.is_contiguous() && d.scores.is_contiguous() && d.labels.is_contiguous()));
  // A threshold above every score leaves both images empty.
  o.score_threshold = 0.95;
  const auto none =
      models::postprocess_detections(head, models::pad_proposals({proposals, proposals}), {{20, 70}, {20, 70}}, o);
  CHECK(none[0].boxes.sizes() == Shape({0, 4}));
  CHECK(none[1].labels.sizes() == Shape{0});
}

TEST_CASE("errors/roi_heads: sampling and loss inputs") {
  const HandCase c = hand_case();
  const RoIHeadsOptions o = test::tiny_roi_heads_options();
  CHECK_THROWS_CONTAINING(models::sample_rois({}, {}, {}, o), "expected one proposals tensor per image, got none");
  CHECK_THROWS_CONTAINING(models::sample_rois({zeros({3, 5}, kFloat64)}, {c.gt_boxes[0]}, {c.gt_labels[0]}, o),
                          "sample_rois: expected proposals of shape (P, 4) (x1, y1, x2, y2), got (3, 5)");
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

TEST_CASE("errors/roi_heads: inference inputs") {
  const Tensor proposals = zeros({3, 4}, kFloat64);
  const BoxHeadOutput head{zeros({3, 3}, kFloat64), zeros({3, 12}, kFloat64)};
  const RoIHeadsOptions o = test::tiny_roi_heads_options();
  CHECK_THROWS_CONTAINING(models::postprocess_detections(head, models::pad_proposals({proposals}), {}, o),
                          "one image size per image (1)");
  CHECK_THROWS_CONTAINING(models::postprocess_detections(head, models::pad_proposals({proposals}), {{0, 5}}, o),
                          "positive (height, width)");
  CHECK_THROWS_CONTAINING(
      models::postprocess_detections(head, models::pad_proposals({proposals, proposals}), {{5, 5}, {5, 5}}, o),
      "expected class_logits of shape (6, 3)");
  CHECK_THROWS_CONTAINING(models::postprocess_detections({head.class_logits, zeros({3, 8}, kFloat64)},
                                                         models::pad_proposals({proposals}), {{5, 5}}, o),
                          "expected box_deltas of shape (3, 12)");
  CHECK_THROWS_CONTAINING(models::postprocess_detections({head.class_logits.to(kFloat32), head.box_deltas},
                                                         models::pad_proposals({proposals}), {{5, 5}}, o),
                          "postprocess_detections");
  RoIHeadsOptions bad = o;
  bad.nms_threshold = -0.5;
  CHECK_THROWS_CONTAINING(models::postprocess_detections(head, models::pad_proposals({proposals}), {{5, 5}}, bad),
                          "nms_threshold >= 0");
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
  RoIHeadsOptions o = test::tiny_roi_heads_options();
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
    results[device] = {losses.at("loss_classifier").detach().cpu(), losses.at("loss_box_reg").detach().cpu(),
                       z.grad().cpu(), d.grad().cpu()};
  }
  for (size_t i = 0; i < 4; ++i) CHECK(allclose(results[1][i], results[0][i], 1e-4, 1e-6));
}

MINIDET_CUDA_TEST_CASE("cuda/roi_heads: inference detections match the CPU") {
  // 2 images of 60 random proposals, C = 3, logits spread so that about half the candidates pass 0.05 and
  // many overlap (NMS has work to do), deltas small enough to move boxes a little and clip some.
  Generator g(21);
  std::vector<Tensor> proposals;
  for (int n = 0; n < 2; ++n) {
    const Tensor corner = mul(rand({60, 2}, kFloat32, &g), 50.0);
    proposals.push_back(cat({corner, add(corner, add(mul(rand({60, 2}, kFloat32, &g), 20.0), 5.0))}, 1));
  }
  const BoxHeadOutput head{mul(randn({120, 4}, kFloat32, &g), 2.0), randn({120, 16}, kFloat32, &g)};
  RoIHeadsOptions o = test::tiny_roi_heads_options();
  o.num_classes = 3;
  o.detections_per_image = 40;  // binds for at least one image
  const models::ImageSizes sizes = {{64, 64}, {60, 70}};
  const auto on_cpu = models::postprocess_detections(head, models::pad_proposals(proposals), sizes, o);
  const auto on_gpu =
      models::postprocess_detections({head.class_logits.cuda(), head.box_deltas.cuda()},
                                     models::pad_proposals({proposals[0].cuda(), proposals[1].cuda()}), sizes, o);
  REQUIRE(on_gpu.size() == 2);
  for (size_t n = 0; n < 2; ++n) {
    CAPTURE(n);
    CHECK(on_gpu[n].boxes.is_cuda());
    REQUIRE(on_gpu[n].boxes.sizes() == on_cpu[n].boxes.sizes());
    CHECK(on_cpu[n].boxes.size(0) > 5);
    // softmax and exp differ by a few ulps between the devices: the same detections, values within 1e-4.
    CHECK(ints(on_gpu[n].labels) == ints(on_cpu[n].labels));
    CHECK(allclose(on_gpu[n].boxes.cpu(), on_cpu[n].boxes, 1e-5, 1e-4));
    CHECK(allclose(on_gpu[n].scores.cpu(), on_cpu[n].scores, 1e-5, 1e-6));
  }
  CHECK(on_cpu[0].boxes.size(0) + on_cpu[1].boxes.size(0) < 2 * 60 * 3);  // something was dropped or suppressed
}
