// rpn_proposals and the RPN module: hand-built proposal cases (order, clipping, small boxes, NMS per image,
// top-n limits, score threshold, empty inputs, ties), the module's shapes and losses, a float64 gradient
// check of its total loss through the head, CUDA against the CPU, errors.
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "autograd/anomaly.h"
#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "core/grad_mode.h"
#include "core/transfer_counts.h"
#include "models/rpn/rpn.h"
#include "models/rpn/rpn_proposals.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/shape.h"
#include "tests/support.h"

using namespace minidet;
using models::ProposalOptions;
using models::RPN;
using models::RPNOptions;
using models::RPNTrainOutput;

namespace {

using Sizes = std::vector<std::array<int64_t, 2>>;
using Boxes = std::vector<std::vector<double>>;  // per image, flat (P * 4)

double logit(double p) { return std::log(p / (1.0 - p)); }

// rpn_proposals with zero deltas, so every anchor decodes to itself: the anchors are the candidate boxes.
// logits (N * K) row-major, anchors (K * 4).
Boxes run(const std::vector<double>& logits, const std::vector<double>& anchors, const Sizes& sizes,
          const ProposalOptions& options = {}) {
  const int64_t images = static_cast<int64_t>(sizes.size()), k = static_cast<int64_t>(anchors.size() / 4);
  const std::vector<Tensor> out =
      models::rpn_proposals(from_vector<double>(logits, {images, k}), zeros({images, k, 4}, kFloat64),
                            from_vector<double>(anchors, {k, 4}), sizes, options);
  Boxes boxes;
  for (const Tensor& p : out) {
    CHECK(p.dim() == 2);
    CHECK(p.size(1) == 4);
    boxes.push_back(p.to_vector<double>());
  }
  return boxes;
}

// Four disjoint 10 x 10 boxes along x.
const std::vector<double> kDisjoint = {0, 0, 10, 10, 20, 0, 30, 10, 40, 0, 50, 10, 60, 0, 70, 10};

// A small RPN (4 channels, stride 8, 6 anchors per position) with N(0, 1) head weights so that the losses
// depend visibly on them, on 32 x 32 images: 4 x 4 features, 96 anchors.
struct RpnSetup {
  Generator gen{23};
  std::shared_ptr<RPN> rpn;
  Tensor features;
  std::vector<Tensor> gt;
  Sizes sizes = {{32, 32}, {30, 27}};
  explicit RpnSetup(DType dtype) {
    RPNOptions options;
    options.in_channels = 4;
    options.anchor_sizes = {8.0, 16.0};
    options.loss.batch_size_per_image = 24;  // fewer than the anchors: the sample matters
    options.train_proposals = {50, 20, 0.7, 1e-3, 0.0};
    options.test_proposals = {40, 10, 0.7, 1e-3, 0.0};
    options.generator = &gen;
    rpn = std::make_shared<RPN>(options);
    rpn->to(dtype);
    NoGradGuard no_grad;
    for (const Tensor& p : rpn->parameters()) p.copy_(randn(p.sizes(), p.options(), &gen));
    features = randn({2, 4, 4, 4}, dtype, &gen);
    gt = {from_vector<double>({2, 3, 20, 18, 10, 12, 30, 29}, {2, 4}, dtype),
          from_vector<double>({5, 5, 14, 12}, {1, 4}, dtype)};
  }
  RPNTrainOutput train(const Device& device, uint64_t seed) {
    std::vector<Tensor> boxes;
    for (const Tensor& g : gt) boxes.push_back(g.to(device));
    Generator sampling(seed);  // the same sample in every evaluation
    return rpn->forward_train(features.to(device), {32, 32}, sizes, boxes, &sampling);
  }
};

}  // namespace

TEST_CASE("values/rpn_proposals: decreasing score order") {
  const Boxes b = run({0.1, 2.0, -1.0, 1.0}, kDisjoint, {{100, 100}});
  CHECK(b[0] == std::vector<double>{20, 0, 30, 10, 60, 0, 70, 10, 0, 0, 10, 10, 40, 0, 50, 10});
}

TEST_CASE("values/rpn_proposals: deltas are decoded against the top anchors") {
  // dx = 0.5 moves anchor 1 (20, 0, 30, 10) by half its width; dw = log 2 doubles anchor 0 around its centre.
  const Tensor deltas = from_vector<double>({0, 0, std::log(2.0), 0, 0.5, 0, 0, 0}, {1, 2, 4});
  const std::vector<Tensor> p = models::rpn_proposals(from_vector<double>({0.0, 1.0}, {1, 2}), deltas,
                                                      from_vector<double>({0, 0, 10, 10, 20, 0, 30, 10}, {2, 4}),
                                                      {{100, 100}});
  const std::vector<double> expected = {25, 0, 35, 10, 0, 0, 15, 10}, got = p[0].to_vector<double>();  // x1 clipped
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-12));
}

TEST_CASE("values/rpn_proposals: clipped to each image's own size") {
  const std::vector<double> anchors = {-5, -5, 40, 40, 5, 2, 12, 8};
  const Boxes b = run({1.0, 0.0, 1.0, 0.0}, anchors, {{20, 30}, {10, 15}});
  CHECK(b[0] == std::vector<double>{0, 0, 30, 20, 5, 2, 12, 8});
  CHECK(b[1] == std::vector<double>{0, 0, 15, 10, 5, 2, 12, 8});
}

TEST_CASE("values/rpn_proposals: small boxes are removed after clipping") {
  ProposalOptions options;
  options.min_size = 2.0;
  // Widths 1.5 (removed), 2 (kept: >= min_size), height 1 (removed), and 5 wide before clipping to x <= 30
  // but 1 after (removed).
  const std::vector<double> anchors = {0, 0, 1.5, 10, 10, 0, 12, 10, 20, 0, 30, 1, 29, 0, 34, 10};
  const Boxes b = run({3.0, 2.0, 1.0, 0.0}, anchors, {{20, 30}}, options);
  CHECK(b[0] == std::vector<double>{10, 0, 12, 10});
}

TEST_CASE("values/rpn_proposals: NMS suppresses within an image but never across images") {
  // Both images see the same three boxes: IoU(b0, b1) = 90/110 > 0.7, IoU(b0, b2) = 0.6, IoU(b1, b2) = 54/106.
  // Image 0 (scores b0 > b1 > b2): b1 goes. Image 1 (b2 > b1 > b0): b0 goes. Image 0's b0 has the best
  // score of the batch and IoU 1 with image 1's b0, 9/11 with its b1: were images mixed, both would go.
  const std::vector<double> anchors = {0, 0, 10, 10, 1, 0, 11, 10, 0, 0, 10, 6};
  const Boxes b = run({3.0, 2.0, 1.0, 1.0, 2.0, 3.0}, anchors, {{50, 50}, {50, 50}});
  CHECK(b[0] == std::vector<double>{0, 0, 10, 10, 0, 0, 10, 6});
  CHECK(b[1] == std::vector<double>{0, 0, 10, 6, 1, 0, 11, 10});
}

TEST_CASE("values/rpn_proposals: pre and post top-n limits") {
  ProposalOptions options;
  options.pre_nms_top_n = 2;
  CHECK(run({0.1, 2.0, -1.0, 1.0}, kDisjoint, {{100, 100}}, options)[0] ==
        std::vector<double>{20, 0, 30, 10, 60, 0, 70, 10});
  options.pre_nms_top_n = 1000;  // more than K: every anchor
  options.post_nms_top_n = 3;
  CHECK(run({0.1, 2.0, -1.0, 1.0}, kDisjoint, {{100, 100}}, options)[0] ==
        std::vector<double>{20, 0, 30, 10, 60, 0, 70, 10, 0, 0, 10, 10});
  // The pre-NMS cut comes first: of the top 2, the second is suppressed, and the third-best box is not
  // considered although NMS would have kept it.
  options.pre_nms_top_n = 2;
  options.post_nms_top_n = 2;
  CHECK(run({3.0, 2.0, 1.0}, {0, 0, 10, 10, 1, 0, 11, 10, 40, 0, 50, 10}, {{100, 100}}, options)[0] ==
        std::vector<double>{0, 0, 10, 10});
  // post_nms_top_n counts per image, after NMS.
  options.pre_nms_top_n = 3;
  options.post_nms_top_n = 2;
  const Boxes b = run({3.0, 2.0, 1.0, 1.0, 2.0, 3.0}, {0, 0, 10, 10, 1, 0, 11, 10, 40, 0, 50, 10}, {{100, 100}, {100, 100}},
                      options);
  CHECK(b[0] == std::vector<double>{0, 0, 10, 10, 40, 0, 50, 10});
  CHECK(b[1] == std::vector<double>{40, 0, 50, 10, 1, 0, 11, 10});
}

TEST_CASE("values/rpn_proposals: score threshold on the sigmoid score") {
  ProposalOptions options;
  options.score_threshold = 0.5;
  // sigmoid(0) = 0.5 is kept (>=); sigmoid(-0.01) < 0.5 is not.
  CHECK(run({0.0, -0.01, logit(0.9), -3.0}, kDisjoint, {{100, 100}}, options)[0] ==
        std::vector<double>{40, 0, 50, 10, 0, 0, 10, 10});
  options.score_threshold = 1.0;  // nothing reaches it: an empty (0, 4) result
  const Boxes b = run({0.0, 1.0, 2.0, 3.0}, kDisjoint, {{100, 100}}, options);
  CHECK(b[0].empty());
}

TEST_CASE("values/rpn_proposals: ties keep input order") {
  // Four equal scores: input order, and the pre-NMS cut keeps the first two.
  CHECK(run({1, 1, 1, 1}, kDisjoint, {{100, 100}})[0] == kDisjoint);
  ProposalOptions options;
  options.pre_nms_top_n = 2;
  CHECK(run({1, 1, 1, 1}, kDisjoint, {{100, 100}}, options)[0] == std::vector<double>{0, 0, 10, 10, 20, 0, 30, 10});
  // Two overlapping boxes of equal score: the first in input order survives NMS.
  CHECK(run({1, 1}, {1, 0, 11, 10, 0, 0, 10, 10}, {{100, 100}})[0] == std::vector<double>{1, 0, 11, 10});
}

TEST_CASE("values/rpn_proposals: empty images and an empty batch") {
  const std::vector<Tensor> none = models::rpn_proposals(zeros({2, 0}, kFloat32), zeros({2, 0, 4}, kFloat32),
                                                         zeros({0, 4}, kFloat32), {{10, 10}, {20, 20}});
  REQUIRE(none.size() == 2);
  for (const Tensor& p : none) {
    CHECK(p.sizes() == Shape{0, 4});
    CHECK(p.dtype() == kFloat32);
  }
  CHECK(models::rpn_proposals(zeros({0, 5}), zeros({0, 5, 4}), zeros({5, 4}), {}).empty());
}

TEST_CASE("values/rpn_proposals: proposals are detached and float32 works") {
  const Tensor objectness = from_vector<float>({0.5f, 2.0f}, {1, 2}).requires_grad_();
  const Tensor deltas = zeros({1, 2, 4}).requires_grad_();
  const std::vector<Tensor> p =
      models::rpn_proposals(objectness, deltas, from_vector<float>({0, 0, 10, 10, 20, 0, 30, 10}, {2, 4}), {{50, 50}});
  CHECK_FALSE(p[0].requires_grad());
  CHECK(p[0].to_vector<float>() == std::vector<float>{20, 0, 30, 10, 0, 0, 10, 10});
}

TEST_CASE("values/rpn_proposals: the padded table holds each image's proposals and their counts") {
  // Three images over the same 6 anchors (pairs overlapping at IoU 0.82): images 0 and 1 keep 4 after NMS,
  // of which post_nms_top_n = 3 are proposals (the count is clamped to P); image 2 keeps none (every score
  // below the threshold).
  const std::vector<double> anchors = {0, 0, 10, 10, 1, 0, 11, 10, 20, 0, 30, 10, 21, 0, 31, 10, 40, 0, 50, 10,
                                       60, 0, 70, 10};
  std::vector<double> logits = {3, 2.5, 2, 1.5, 1, 0.5, 3, 2, 1, 0, -1, -2, -9, -9, -9, -9, -9, -9};
  ProposalOptions o;
  o.post_nms_top_n = 3;
  o.score_threshold = 0.01;
  const Sizes sizes = {{80, 80}, {80, 80}, {80, 80}};
  const Tensor objectness = from_vector<double>(logits, {3, 6}), deltas = zeros({3, 6, 4}, kFloat64);
  const Tensor anchor_table = from_vector<double>(anchors, {6, 4});
  const std::vector<Tensor> per_image = models::rpn_proposals(objectness, deltas, anchor_table, sizes, o);
  const models::PaddedProposals table = models::rpn_proposals_padded(objectness, deltas, anchor_table, sizes, o);
  REQUIRE(table.boxes.sizes() == Shape({3, 3, 4}));
  CHECK(table.counts.to_vector<int64_t>() == std::vector<int64_t>{3, 3, 0});
  for (int64_t n = 0; n < 3; ++n) {
    CAPTURE(n);
    const int64_t count = per_image[static_cast<size_t>(n)].size(0);
    CHECK(test::allclose(table.boxes.select(0, n).narrow(0, 0, count), per_image[static_cast<size_t>(n)], 0.0, 0.0));
  }
  CHECK(!table.boxes.requires_grad());
  const models::PaddedProposals empty =
      models::rpn_proposals_padded(zeros({2, 0}, kFloat64), zeros({2, 0, 4}, kFloat64), zeros({0, 4}, kFloat64),
                                   {{8, 8}, {8, 8}});
  CHECK(empty.boxes.sizes() == Shape({2, 0, 4}));
  CHECK(empty.counts.to_vector<int64_t>() == std::vector<int64_t>{0, 0});
}

TEST_CASE("values/rpn: module shapes cached anchors and finite losses") {
  RpnSetup s(kFloat64);
  CHECK(s.rpn->head->num_anchors == 6);
  bool named_head = false;
  for (const auto& [name, p] : s.rpn->named_parameters()) named_head |= name == "head.conv.weight";
  CHECK(named_head);
  const Tensor anchors = s.rpn->anchors({32, 32}, s.features);
  CHECK(anchors.sizes() == Shape{96, 4});
  CHECK(anchors.is_same(s.rpn->anchors({32, 32}, s.features)));  // cached: the same tensor
  // Stride 8: position (y, x) = (1, 2) holds anchors centred on (16, 8); its ratio-1 size-8 anchor is index
  // (1 * 4 + 2) * 6 + 2 (ratios outer, sizes inner).
  CHECK(anchors.select(0, 38).to_vector<double>() == std::vector<double>{12, 4, 20, 12});

  const RPNTrainOutput out = s.train(Device::cpu(), 7);
  // The training proposals: one (2, 20, 4) table, image n's proposals its first counts[n] rows.
  const Tensor& table = out.proposals.boxes;
  REQUIRE(table.sizes() == Shape({2, 20, 4}));  // P = train_proposals.post_nms_top_n
  CHECK_FALSE(table.requires_grad());
  const std::vector<int64_t> counts = out.proposals.counts.to_vector<int64_t>();
  REQUIRE(counts.size() == 2);
  for (size_t n = 0; n < 2; ++n) {
    CAPTURE(n);
    REQUIRE(counts[n] >= 1);
    CHECK(counts[n] <= 20);
    const Tensor p = table.select(0, static_cast<int64_t>(n)).narrow(0, 0, counts[n]);
    CHECK(max(p.select(1, 2)).item<double>() <= double(s.sizes[n][1]));  // inside image n
    CHECK(max(p.select(1, 3)).item<double>() <= double(s.sizes[n][0]));
    CHECK(min(p).item<double>() >= 0.0);
  }
  const double objectness = out.losses.objectness.item<double>(), box = out.losses.box.item<double>();
  CHECK(std::isfinite(objectness));
  CHECK(std::isfinite(box));
  CHECK(box > 0.0);
  CHECK(out.losses.objectness.requires_grad());
}

TEST_CASE("values/rpn: forward_infer gives the detached test proposals as one padded table") {
  RpnSetup s(kFloat64);
  const models::PaddedProposals proposals =
      s.rpn->forward_infer(s.features.clone().requires_grad_(), {32, 32}, s.sizes);
  CHECK(GradMode::is_enabled());  // restored
  CHECK_FALSE(proposals.boxes.requires_grad());
  REQUIRE(proposals.boxes.sizes() == Shape({2, 10, 4}));  // test_proposals.post_nms_top_n slots per image
  // The same proposals as rpn_proposals' per-image tensors on the same outputs.
  NoGradGuard no_grad;
  const models::RPNHeadOutput out = (*s.rpn->head)(s.features);
  const std::vector<Tensor> listed =
      models::rpn_proposals(models::flatten_objectness(out.objectness), models::flatten_deltas(out.deltas, 4),
                            s.rpn->anchors({32, 32}, s.features), s.sizes, s.rpn->options().test_proposals);
  const std::vector<int64_t> counts = proposals.counts.to_vector<int64_t>();
  for (int64_t n = 0; n < 2; ++n) {
    CAPTURE(n);
    REQUIRE(counts[n] == listed[n].size(0));
    CHECK(counts[n] > 0);
    CHECK(test::allclose(proposals.boxes.select(0, n).narrow(0, 0, counts[n]), listed[n], 0, 0));
  }
}

TEST_CASE("gradcheck/rpn: the module's total loss through the head parameters with the sample fixed") {
  RpnSetup s(kFloat64);
  autograd::TensorList inputs = s.rpn->head->parameters();
  const auto fn = [&](const autograd::TensorList&) {
    const RPNTrainOutput out = s.train(Device::cpu(), 99);
    return add(out.losses.objectness, out.losses.box);
  };
  const Tensor loss = fn(inputs);
  loss.backward();
  double grad_norm = 0.0;
  for (const Tensor& p : inputs) grad_norm += sum(mul(p.grad(), p.grad())).item<double>();
  CHECK(grad_norm > 0.0);  // the analytic gradient is not all zero
  const auto result = autograd::gradcheck(fn, inputs);
  MESSAGE(result.report);
  MESSAGE("max abs error " << result.max_abs_error);
  CHECK_MESSAGE(result.ok, result.report);
}

TEST_CASE("errors/rpn_proposals: shapes dtypes image sizes and options") {
  const Tensor o = zeros({2, 3}, kFloat64), d = zeros({2, 3, 4}, kFloat64), a = zeros({3, 4}, kFloat64);
  const Sizes sizes = {{10, 10}, {10, 10}};
  CHECK_THROWS_CONTAINING(models::rpn_proposals(zeros({6}, kFloat64), d, a, sizes), "rpn_proposals: expected objectness of shape (N, K)");
  CHECK_THROWS_CONTAINING(models::rpn_proposals(o, zeros({2, 3, 5}, kFloat64), a, sizes), "expected deltas of shape (N, K, 4) = (2, 3, 4)");
  CHECK_THROWS_CONTAINING(models::rpn_proposals(o, zeros({1, 3, 4}, kFloat64), a, sizes), "expected deltas of shape");
  CHECK_THROWS_CONTAINING(models::rpn_proposals(o, d, zeros({4, 4}, kFloat64), sizes), "expected anchors of shape (K, 4) = (3, 4)");
  CHECK_THROWS_CONTAINING(models::rpn_proposals(o, d, a.to(kFloat32), sizes), "rpn_proposals");
  CHECK_THROWS_CONTAINING(models::rpn_proposals(o, d.to(kFloat32), a, sizes), "rpn_proposals");
  CHECK_THROWS_CONTAINING(models::rpn_proposals(zeros({2, 3}, kInt64), d, a, sizes), "rpn_proposals");
  CHECK_THROWS_CONTAINING(models::rpn_proposals(o, d, a, {{10, 10}}), "expected one image size per image (2), got 1");
  CHECK_THROWS_CONTAINING(models::rpn_proposals(o, d, a, {{10, 10}, {0, 10}}), "positive (height, width) for image 1");
  struct BadOption {
    void (*set)(ProposalOptions&);
    const char* fragment;
  };
  const BadOption cases[] = {
      {[](ProposalOptions& b) { b.pre_nms_top_n = 0; }, "pre_nms_top_n >= 1"},
      {[](ProposalOptions& b) { b.post_nms_top_n = -1; }, "post_nms_top_n >= 1"},
      {[](ProposalOptions& b) { b.nms_threshold = 1.5; }, "nms_threshold in [0, 1]"},
      {[](ProposalOptions& b) { b.score_threshold = -0.1; }, "score_threshold in [0, 1]"},
      {[](ProposalOptions& b) { b.min_size = -1.0; }, "min_size >= 0"},
  };
  for (const BadOption& c : cases) {
    ProposalOptions bad;
    c.set(bad);
    CHECK_THROWS_CONTAINING(models::rpn_proposals(o, d, a, sizes, bad), c.fragment);
  }
  ProposalOptions bad;
  bad.min_size = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_CONTAINING(models::check_proposal_options("caller", bad), "caller: expected a finite min_size >= 0");
}

TEST_CASE("errors/rpn_proposals: anomaly mode names the rows with a NaN score or box, which are dropped otherwise") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Rows 0 and 3 have NaN objectness; row 2 a NaN dx, so its box is NaN. Only row 1 is a proposal.
  const Tensor logits = from_vector<double>({nan, 2.0, 1.0, nan}, {1, 4});
  std::vector<double> delta_values(16, 0.0);
  delta_values[8] = nan;
  const Tensor deltas = from_vector<double>(delta_values, {1, 4, 4});
  const Tensor anchors = from_vector<double>(kDisjoint, {4, 4});
  const Sizes sizes = {{100, 100}};
  const auto check_dropped = [&] {
    const std::vector<Tensor> p = models::rpn_proposals(logits, deltas, anchors, sizes);
    CHECK(p[0].to_vector<double>() == std::vector<double>{20, 0, 30, 10});
    CHECK(models::rpn_proposals_padded(logits, deltas, anchors, sizes).counts.to_vector<int64_t>() ==
          std::vector<int64_t>{1});
  };
  check_dropped();
  {
    autograd::DetectAnomalyGuard anomaly;
    const std::string rows = "of the 4 candidate rows (the top 4 of each of 1 images), 2 have a NaN objectness score "
                             "and 1 a NaN box; outside anomaly mode they are dropped";
    CHECK_THROWS_CONTAINING(models::rpn_proposals(logits, deltas, anchors, sizes),
                            "anomaly: rpn_proposals: " + rows);
    CHECK_THROWS_CONTAINING(models::rpn_proposals_padded(logits, deltas, anchors, sizes),
                            "anomaly: rpn_proposals_padded: " + rows);
    // Finite rows pass anomaly mode unchanged.
    CHECK(run({0.1, 2.0, -1.0, 1.0}, kDisjoint, {{100, 100}})[0].size() == 16);
  }
  check_dropped();  // the guard is gone: silent again
}

TEST_CASE("errors/rpn: options features image sizes and targets") {
  RPNOptions bad;
  bad.in_channels = 0;
  CHECK_THROWS_CONTAINING(RPN(bad), "RPN: in_channels and feature_stride must be positive");
  bad = {};
  bad.test_proposals.nms_threshold = -1;
  CHECK_THROWS_CONTAINING(RPN(bad), "RPN (test_proposals): expected nms_threshold in [0, 1]");

  RpnSetup s(kFloat64);
  RPN& rpn = *s.rpn;
  CHECK_THROWS_CONTAINING(rpn.forward_infer(zeros({2, 3, 4, 4}, kFloat64), {32, 32}, s.sizes),
                          "expected features of shape (N, 4, h, w)");
  CHECK_THROWS_CONTAINING(rpn.forward_infer(s.features, {40, 32}, s.sizes),
                          "features of size 4 x 4 do not match an image of 40 x 32 at stride 8 (expected 5 x 4)");
  CHECK_THROWS_CONTAINING(rpn.forward_infer(zeros({2, 4, 5, 4}, kFloat64), {32, 32}, s.sizes), "do not match");
  CHECK_NOTHROW(rpn.forward_infer(zeros({2, 4, 5, 4}, kFloat64), {33, 32}, s.sizes));  // ceil(33 / 8) = 5
  CHECK_THROWS_CONTAINING(rpn.forward_infer(s.features, {32, 32}, {{32, 32}}),
                          "RPN::forward_infer: expected one image size per image (2), got 1");
  CHECK_THROWS_CONTAINING(rpn.forward_infer(s.features, {32, 32}, {{32, 32}, {33, 32}}),
                          "image 1 of size (33, 32) is larger than the padded batch (32, 32)");
  CHECK_THROWS_CONTAINING(rpn.forward_train(s.features, {32, 32}, {{32, 32}}, s.gt),
                          "RPN::forward_train: expected one image size per image (2), got 1");
  CHECK_THROWS_CONTAINING(rpn.forward_train(s.features, {32, 32}, s.sizes, {s.gt[0]}),
                          "expected one gt_boxes tensor per image (2), got 1");
  CHECK_THROWS_CONTAINING(rpn.forward_train(s.features, {32, 32}, s.sizes, {s.gt[0], s.gt[1].to(kFloat32)}),
                          "rpn_loss");
  CHECK_THROWS_CONTAINING(rpn.forward_train(s.features.to(kFloat32), {32, 32}, s.sizes, s.gt),
                          "RPN: expected features of the head's dtype");
}

MINIDET_CUDA_TEST_CASE("cuda/rpn_proposals: the same proposals as the CPU") {
  for (DType dtype : {kFloat64, kFloat32}) {
    CAPTURE(dtype);
    Generator gen(31);
    const int64_t images = 3, k = 300;
    // Logits spread evenly over [-3, 3] in a random order: no two scores are close, so NMS's order cannot
    // depend on a last-bit difference between the devices' sigmoid.
    const Tensor order = topk(rand({images, k}, kFloat64, &gen), k, 1).indices.to(kFloat64);
    const Tensor logits = sub(mul(order, 6.0 / k), 3.0).to(dtype);
    const Tensor deltas = mul(randn({images, k, 4}, dtype, &gen), 0.2);
    const Tensor xy = mul(rand({k, 2}, dtype, &gen), 60.0), wh = add(mul(rand({k, 2}, dtype, &gen), 20.0), 2.0);
    const Tensor anchors = cat({sub(xy, 5.0), add(xy, wh)}, 1);
    const Sizes sizes = {{64, 64}, {50, 60}, {40, 30}};
    ProposalOptions options{120, 40, 0.6, 1.0, 0.1};
    const std::vector<Tensor> cpu = models::rpn_proposals(logits, deltas, anchors, sizes, options);
    const std::vector<Tensor> gpu =
        models::rpn_proposals(logits.cuda(), deltas.cuda(), anchors.cuda(), sizes, options);
    REQUIRE(gpu.size() == cpu.size());
    for (size_t n = 0; n < cpu.size(); ++n) {
      CHECK(gpu[n].is_cuda());
      REQUIRE(gpu[n].sizes() == cpu[n].sizes());
      CHECK(cpu[n].size(0) > 0);
      CHECK(test::allclose(gpu[n].cpu(), cpu[n], 1e-5, 1e-4));
    }
  }
  CHECK_THROWS_CONTAINING(models::rpn_proposals(zeros({1, 2}).cuda(), zeros({1, 2, 4}).cuda(), zeros({2, 4}),
                                                {{10, 10}}),
                          "rpn_proposals");
}

MINIDET_CUDA_TEST_CASE("cuda/rpn_proposals: one device-to-host copy and none host-to-device for any batch size") {
  Generator gen(37);
  for (int64_t images : {1, 4, 16}) {
    CAPTURE(images);
    const int64_t k = 500;
    const Tensor logits = randn({images, k}, kFloat32, &gen).cuda();
    const Tensor deltas = mul(randn({images, k, 4}, kFloat32, &gen), 0.2).cuda();
    const Tensor xy = mul(rand({k, 2}, kFloat32, &gen), 60.0), wh = add(mul(rand({k, 2}, kFloat32, &gen), 20.0), 2.0);
    const Tensor anchors = cat({xy, add(xy, wh)}, 1).cuda();
    const Sizes sizes(static_cast<size_t>(images), std::array<int64_t, 2>{64, 64});
    models::rpn_proposals(logits, deltas, anchors, sizes);  // warm-up: nothing lazily set up is counted
    const TransferCounts before = transfer_counts();
    const std::vector<Tensor> p = models::rpn_proposals(logits, deltas, anchors, sizes);
    const TransferCounts call = transfer_counts() - before;
    CHECK(call.device_to_host == 1);  // the per-image counts, with NMS's status in the same copy
    CHECK(call.host_to_device == 0);
    CHECK(static_cast<int64_t>(p.size()) == images);
    // The padded form: no copy at all, and the same proposals.
    const TransferCounts padded_before = transfer_counts();
    const models::PaddedProposals table = models::rpn_proposals_padded(logits, deltas, anchors, sizes);
    const TransferCounts padded_call = transfer_counts() - padded_before;
    CHECK(padded_call.device_to_host == 0);
    CHECK(padded_call.host_to_device == 0);
    const std::vector<int64_t> counts = table.counts.cpu().to_vector<int64_t>();
    for (int64_t n = 0; n < images; ++n) {
      CHECK(counts[static_cast<size_t>(n)] == p[static_cast<size_t>(n)].size(0));
      CHECK(test::allclose(table.boxes.select(0, n).narrow(0, 0, counts[static_cast<size_t>(n)]).cpu(),
                           p[static_cast<size_t>(n)].cpu(), 0.0, 0.0));
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/rpn_proposals: anomaly mode names NaN rows as on the CPU, and only it reads them") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Generator gen(41);
  const int64_t k = 200;
  Tensor logits = randn({2, k}, kFloat32, &gen);
  logits.data<float>()[3] = static_cast<float>(nan);  // image 0
  logits.data<float>()[k + 7] = static_cast<float>(nan);  // image 1
  const Tensor deltas = mul(randn({2, k, 4}, kFloat32, &gen), 0.2);
  const Tensor xy = mul(rand({k, 2}, kFloat32, &gen), 60.0), wh = add(mul(rand({k, 2}, kFloat32, &gen), 20.0), 2.0);
  const Tensor anchors = cat({xy, add(xy, wh)}, 1);
  const Sizes sizes = {{64, 64}, {64, 64}};
  const ProposalOptions options{50, 20, 0.7, 1e-3, 0.0};
  // Normal mode: the padded path still makes no copy at all, NaN rows or not.
  models::rpn_proposals_padded(logits.cuda(), deltas.cuda(), anchors.cuda(), sizes, options);  // warm-up
  const TransferCounts before = transfer_counts();
  models::rpn_proposals_padded(logits.cuda(), deltas.cuda(), anchors.cuda(), sizes, options);
  CHECK((transfer_counts() - before).device_to_host == 0);
  autograd::DetectAnomalyGuard anomaly;
  const std::string message = "of the 100 candidate rows (the top 50 of each of 2 images), 2 have a NaN objectness";
  CHECK_THROWS_CONTAINING(models::rpn_proposals(logits, deltas, anchors, sizes, options), message);
  CHECK_THROWS_CONTAINING(models::rpn_proposals_padded(logits.cuda(), deltas.cuda(), anchors.cuda(), sizes, options),
                          message);
}

MINIDET_CUDA_TEST_CASE("cuda/rpn: proposals losses and head gradients match the CPU") {
  for (DType dtype : {kFloat64, kFloat32}) {
    CAPTURE(dtype);
    const double tol = dtype == kFloat64 ? 1e-9 : 1e-4;
    RpnSetup on_cpu(dtype), on_gpu(dtype);  // identical weights: same seeds
    on_gpu.rpn->to(Device::cuda());
    const RPNTrainOutput c = on_cpu.train(Device::cpu(), 5), g = on_gpu.train(Device::cuda(), 5);
    CHECK(g.losses.objectness.is_cuda());
    CHECK(test::allclose(g.losses.objectness.detach().cpu(), c.losses.objectness.detach(), tol, 1e-6));
    CHECK(test::allclose(g.losses.box.detach().cpu(), c.losses.box.detach(), tol, 1e-6));
    // float64 logits agree to ~1e-15, far closer than any two of them: the same proposals. In float32 two
    // near-equal logits could swap places, so only the shapes' bounds are compared.
    CHECK(g.proposals.boxes.is_cuda());
    CHECK(g.proposals.counts.is_cuda());
    REQUIRE(g.proposals.boxes.sizes() == c.proposals.boxes.sizes());
    const std::vector<int64_t> gpu_counts = g.proposals.counts.cpu().to_vector<int64_t>();
    const std::vector<int64_t> cpu_counts = c.proposals.counts.to_vector<int64_t>();
    for (size_t n = 0; n < cpu_counts.size(); ++n) {
      CAPTURE(n);
      CHECK(gpu_counts[n] <= 20);
      if (dtype == kFloat64) {
        REQUIRE(gpu_counts[n] == cpu_counts[n]);
        const int64_t image = static_cast<int64_t>(n);
        CHECK(test::allclose(g.proposals.boxes.select(0, image).narrow(0, 0, gpu_counts[n]).cpu(),
                             c.proposals.boxes.select(0, image).narrow(0, 0, cpu_counts[n]), 1e-9, 1e-9));
      }
    }
    add(c.losses.objectness, c.losses.box).backward();
    add(g.losses.objectness, g.losses.box).backward();
    const nn::NamedTensors p_cpu = on_cpu.rpn->named_parameters(), p_gpu = on_gpu.rpn->named_parameters();
    for (size_t i = 0; i < p_cpu.size(); ++i) {
      CAPTURE(p_cpu[i].first);
      CHECK(test::allclose(p_gpu[i].second.grad().cpu(), p_cpu[i].second.grad(), dtype == kFloat64 ? 1e-8 : 1e-3,
                           1e-5));
    }
  }
}
