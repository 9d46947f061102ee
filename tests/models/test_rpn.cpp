// RPN head and losses: output shapes and anchor order, hand-computed targets and losses, an image without
// objects, a float64 gradient check through the head, CUDA against the CPU, errors.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "models/anchors/anchor_generator.h"
#include "models/rpn/rpn_head.h"
#include "models/rpn/rpn_loss.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"
#include "tests/support.h"

using namespace minidet;
using models::RPNHead;
using models::RPNLosses;
using models::RPNLossOptions;
using models::RPNTargets;

namespace {

// Five anchors and three images (see the test below for the IoUs), float64.
Tensor five_anchors() {
  return from_vector<double>({0, 0, 10, 10, 5, 0, 15, 10, 20, 20, 30, 30, 0, 0, 20, 20, 40, 40, 50, 50}, {5, 4});
}
std::vector<Tensor> three_images_gt() {
  return {from_vector<double>({0, 0, 10, 10, 20, 20, 32, 30}, {2, 4}), from_vector<double>({4, 0, 16, 10}, {1, 4}),
          zeros({0, 4}, kFloat64)};
}

double bce(double x, double t) { return std::max(x, 0.0) - x * t + std::log1p(std::exp(-std::abs(x))); }
double smooth_l1(double d, double beta) { return std::abs(d) < beta ? 0.5 * d * d / beta : std::abs(d) - 0.5 * beta; }

// A small head on a 4 x 4 feature map of a 32 x 32 image, 6 anchors per position (96 anchors), two images
// with objects and one without.
struct RpnSetup {
  Generator gen{17};
  models::AnchorGenerator anchor_generator{{{8.0, 16.0}}, {{0.5, 1.0, 2.0}}};
  RPNHead head{3, 6, &gen};
  Tensor features, anchors;
  std::vector<Tensor> gt;
  explicit RpnSetup(DType dtype) {
    head.to(dtype);
    // Larger head weights than the N(0, 0.01) default so that the losses depend visibly on them.
    NoGradGuard no_grad;
    for (const Tensor& p : head.parameters()) p.copy_(randn(p.sizes(), p.options(), &gen));
    features = randn({3, 3, 4, 4}, dtype, &gen);
    anchors = anchor_generator.anchors(32, 32, {{4, 4}}, dtype);
    gt = {from_vector<double>({2, 3, 20, 18, 10, 12, 30, 29}, {2, 4}, dtype),
          from_vector<double>({5, 5, 14, 12}, {1, 4}, dtype), zeros({0, 4}, dtype)};
  }
};

// The losses of the setup's head on `device`, sampled from a fresh generator with `seed`.
RPNLosses setup_losses(RpnSetup& s, const Device& device, uint64_t seed, const Tensor& features) {
  const models::RPNHeadOutput out = s.head.forward(features);
  std::vector<Tensor> gt;
  for (const Tensor& g : s.gt) gt.push_back(g.to(device));
  Generator sampling(seed);
  RPNLossOptions options;
  options.batch_size_per_image = 24;  // fewer than the anchors: the sample matters
  return models::rpn_loss(models::flatten_objectness(out.objectness), models::flatten_deltas(out.deltas),
                          s.anchors.to(device), gt, &sampling, options);
}

}  // namespace

TEST_CASE("values/rpn: head output shapes and initialisation") {
  Generator gen(1);
  RPNHead head(16, 3, &gen);
  const models::RPNHeadOutput out = head.forward(randn({2, 16, 5, 7}, kFloat32, &gen));
  CHECK(out.objectness.sizes() == Shape{2, 3, 5, 7});
  CHECK(out.deltas.sizes() == Shape{2, 12, 5, 7});
  CHECK(head.cls_logits->bias.to_vector<float>() == std::vector<float>(3, 0.0f));
  // N(0, 0.01^2) weights: the sample standard deviation of 16*16*9 draws is close to 0.01.
  const std::vector<float> w = head.conv->weight.to_vector<float>();
  double sq = 0;
  for (float v : w) sq += double(v) * v;
  CHECK(std::sqrt(sq / w.size()) == doctest::Approx(0.01).epsilon(0.1));
}

TEST_CASE("values/rpn: flattened outputs follow the anchors' order") {
  // objectness[n, a, y, x] -> flat[n, (y * w + x) * A + a];  deltas[n, 4a + c, y, x] -> flat[n, ..., c].
  const int64_t n = 2, a = 3, h = 2, w = 4;
  const Tensor objectness = arange(static_cast<double>(n * a * h * w), kFloat64).reshape({n, a, h, w});
  const Tensor deltas = arange(static_cast<double>(n * 4 * a * h * w), kFloat64).reshape({n, 4 * a, h, w});
  const Tensor flat_o = models::flatten_objectness(objectness), flat_d = models::flatten_deltas(deltas);
  CHECK(flat_o.sizes() == Shape{n, h * w * a});
  CHECK(flat_d.sizes() == Shape{n, h * w * a, 4});
  const std::vector<double> o = flat_o.to_vector<double>(), d = flat_d.to_vector<double>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < a; ++k) {
          const int64_t anchor = (y * w + x) * a + k;
          CHECK(o[i * h * w * a + anchor] == double(((i * a + k) * h + y) * w + x));
          for (int64_t c = 0; c < 4; ++c)
            CHECK(d[(i * h * w * a + anchor) * 4 + c] == double(((i * 4 * a + 4 * k + c) * h + y) * w + x));
        }
}

TEST_CASE("values/rpn: targets by hand for three images") {
  // Image 0, gt (0,0,10,10) and (20,20,32,30): a0 IoU 1 -> 1; a1 IoU 1/3 with gt0 -> ignored; a2 IoU 100/120
  // with gt1 -> 1; a3 IoU 1/4 -> 0; a4 -> 0.
  // Image 1, gt (4,0,16,10): a0 IoU 60/160 -> ignored; a1 100/120 -> 1; a2 0 -> 0; a3 120/400 = 0.3 exactly
  // the low threshold -> ignored; a4 -> 0.  Image 2: no objects, all 0.
  const RPNTargets t = models::rpn_targets(five_anchors(), three_images_gt());
  CHECK(t.labels.sizes() == Shape{3, 5});
  CHECK(t.labels.to_vector<int64_t>() == std::vector<int64_t>{1, -1, 1, 0, 0, -1, 1, 0, -1, 0, 0, 0, 0, 0, 0});
  const std::vector<double> r = t.regression.to_vector<double>();
  const double log12 = std::log(1.2);
  // (dx, dy, dw, dh) of the positives; zero for every other anchor.
  const std::vector<double> expected = {0, 0, 0, 0,  0, 0, 0, 0,  0.1, 0, log12, 0,  0, 0, 0, 0,  0, 0, 0, 0,
                                        0, 0, 0, 0,  0, 0, log12, 0,  0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0,
                                        0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0};
  REQUIRE(r.size() == expected.size());
  for (size_t i = 0; i < r.size(); ++i) CHECK(r[i] == doctest::Approx(expected[i]).epsilon(1e-12));
  CHECK(t.matched_boxes.select(0, 0).select(0, 2).to_vector<double>() == std::vector<double>{20, 20, 32, 30});
  CHECK(t.matched_boxes.select(0, 0).select(0, 3).to_vector<double>() == std::vector<double>{0, 0, 20, 20});  // the anchor
}

TEST_CASE("values/rpn: targets of a batch equal each image's targets alone") {
  // rpn_targets pads the images' objects to the most any image has with empty boxes: that must change
  // nothing. Random anchors and objects (0, 1, 4 and 2 per image), float32, compared with one call per image.
  Generator gen(21);
  const auto random_boxes = [&](int64_t m, double size) {
    const Tensor corner = rand({m, 2}, kFloat32, &gen) * 100.0;
    return cat({corner, corner + rand({m, 2}, kFloat32, &gen) * size + 2.0}, 1);
  };
  const Tensor anchors = random_boxes(300, 40.0);
  const std::vector<Tensor> gt = {random_boxes(0, 30), random_boxes(1, 30), random_boxes(4, 30), random_boxes(2, 30)};
  const RPNTargets batch = models::rpn_targets(anchors, gt);
  for (size_t n = 0; n < gt.size(); ++n) {
    CAPTURE(n);
    const RPNTargets alone = models::rpn_targets(anchors, {gt[n]});
    const int64_t i = static_cast<int64_t>(n);
    CHECK(batch.labels.select(0, i).to_vector<int64_t>() == alone.labels.select(0, 0).to_vector<int64_t>());
    CHECK(test::max_abs_diff(batch.matched_boxes.select(0, i), alone.matched_boxes.select(0, 0)) == 0);
    CHECK(test::max_abs_diff(batch.regression.select(0, i), alone.regression.select(0, 0)) == 0);
  }
  CHECK(batch.labels.select(0, 0).to_vector<int64_t>() == std::vector<int64_t>(300, 0));  // no objects
  CHECK(test::max_abs_diff(batch.labels.select(0, 2).to(kFloat32), zeros({300})) > 0);     // some matched
}

TEST_CASE("values/rpn: losses by hand when every labelled anchor is sampled") {
  // batch_size_per_image 10 >= 5 anchors with at most 2 positives: every non-ignored anchor is sampled,
  // whatever the generator draws. Sampled: image 0 a0 a2 (pos) a3 a4; image 1 a1 (pos) a2 a4; image 2 all
  // five: S = 12.
  Generator gen(3);
  const Tensor objectness = randn({3, 5}, kFloat64, &gen), deltas = randn({3, 5, 4}, kFloat64, &gen);
  RPNLossOptions options;
  options.batch_size_per_image = 10;
  const RPNLosses losses = models::rpn_loss(objectness, deltas, five_anchors(), three_images_gt(), &gen, options);
  const std::vector<double> o = objectness.to_vector<double>(), d = deltas.to_vector<double>();
  const std::vector<int64_t> labels = {1, -1, 1, 0, 0, -1, 1, 0, -1, 0, 0, 0, 0, 0, 0};
  const std::vector<double> r = models::rpn_targets(five_anchors(), three_images_gt()).regression.to_vector<double>();
  double objectness_sum = 0, box_sum = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0) continue;
    objectness_sum += bce(o[i], labels[i] == 1 ? 1.0 : 0.0);
    if (labels[i] == 1)
      for (size_t c = 0; c < 4; ++c) box_sum += smooth_l1(d[4 * i + c] - r[4 * i + c], 1.0 / 9.0);
  }
  CHECK(losses.objectness.dim() == 0);
  CHECK(losses.objectness.item<double>() == doctest::Approx(objectness_sum / 12.0).epsilon(1e-12));
  CHECK(losses.box.item<double>() == doctest::Approx(box_sum / 12.0).epsilon(1e-12));
}

TEST_CASE("values/rpn: images without objects give background targets and no box loss") {
  Generator gen(4);
  const Tensor objectness = randn({2, 5}, kFloat64, &gen).requires_grad_();
  const Tensor deltas = randn({2, 5, 4}, kFloat64, &gen).requires_grad_();
  const std::vector<Tensor> none = {zeros({0, 4}, kFloat64), zeros({0, 4}, kFloat64)};
  const RPNLosses losses = models::rpn_loss(objectness, deltas, five_anchors(), none, &gen);
  CHECK(losses.box.item<double>() == 0.0);
  double expected = 0;
  for (double x : objectness.to_vector<double>()) expected += bce(x, 0.0);
  CHECK(losses.objectness.item<double>() == doctest::Approx(expected / 10.0).epsilon(1e-12));
  (losses.objectness + losses.box).backward();
  // No positives: the deltas get an all-zero gradient, the logits (sigmoid(x) - 0) / 10.
  CHECK(test::max_abs_diff(deltas.grad(), zeros({2, 5, 4}, kFloat64)) == 0.0);
  const std::vector<double> x = objectness.to_vector<double>(), g = objectness.grad().to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) CHECK(g[i] == doctest::Approx(1.0 / (1.0 + std::exp(-x[i])) / 10.0));
}

TEST_CASE("gradcheck/rpn: the losses through the head and its parameters with the sample fixed by a seed") {
  RpnSetup s(kFloat64);
  autograd::TensorList inputs = {s.features.clone().requires_grad_()};
  for (const Tensor& p : s.head.parameters()) inputs.push_back(p);
  // A fresh generator with the same seed in every evaluation: the same anchors are sampled each time.
  const auto fn = [&](const autograd::TensorList& in) {
    const RPNLosses l = setup_losses(s, Device::cpu(), 99, in[0]);
    return stack({l.objectness, l.box}, 0);
  };
  const RPNLosses at_start = setup_losses(s, Device::cpu(), 99, s.features);
  CHECK(at_start.box.item<double>() > 0.0);
  const auto result = autograd::gradcheck(fn, inputs);
  MESSAGE(result.report);
  CHECK_MESSAGE(result.ok, result.report);
}

TEST_CASE("errors/rpn: shapes devices dtypes and head input") {
  const Tensor anchors = five_anchors();
  const std::vector<Tensor> gt = three_images_gt();
  const Tensor o = zeros({3, 5}, kFloat64), d = zeros({3, 5, 4}, kFloat64);
  CHECK_THROWS_CONTAINING(models::rpn_loss(zeros({3, 4}, kFloat64), d, anchors, gt), "expected objectness of shape (3, 5)");
  CHECK_THROWS_CONTAINING(models::rpn_loss(o, zeros({3, 5, 3}, kFloat64), anchors, gt), "expected deltas of shape (3, 5, 4)");
  CHECK_THROWS_CONTAINING(models::rpn_loss(zeros({2, 5}, kFloat64), d, anchors, gt), "expected objectness of shape (3, 5)");
  CHECK_THROWS_CONTAINING(models::rpn_loss(o, d, zeros({5, 3}, kFloat64), gt), "rpn_loss: expected anchors with 4 columns (x1, y1, x2, y2) or 5");
  CHECK_THROWS_CONTAINING(models::rpn_loss(o, d, anchors, {zeros({1, 5}, kFloat64), gt[1], gt[2]}),
                          "expected gt_boxes[0] of shape (M, 4)");
  CHECK_THROWS_CONTAINING(models::rpn_loss(o.to(kFloat32), d, anchors, gt), "rpn_loss");
  CHECK_THROWS_CONTAINING(models::rpn_targets(anchors, {zeros({1, 4})}), "rpn_targets");
  Generator gen(1);
  RPNHead head(8, 3, &gen);
  CHECK_THROWS_CONTAINING(head.forward(zeros({1, 4, 5, 5})), "expected features of shape (N, 8, h, w)");
  CHECK_THROWS_CONTAINING(RPNHead(0, 3), "must be positive");
  CHECK_THROWS_CONTAINING(models::flatten_deltas(zeros({1, 6, 2, 2})), "expected (N, 4A, h, w)");
}

MINIDET_CUDA_TEST_CASE("cuda/rpn: targets losses and head gradients match the CPU in float32") {
  RpnSetup on_cpu(kFloat32), on_gpu(kFloat32);  // identical weights: same seeds
  on_gpu.head.to(Device::cuda());
  const RPNTargets t_cpu = models::rpn_targets(on_cpu.anchors, on_cpu.gt);
  std::vector<Tensor> gt_gpu;
  for (const Tensor& g : on_gpu.gt) gt_gpu.push_back(g.cuda());
  const RPNTargets t_gpu = models::rpn_targets(on_gpu.anchors.cuda(), gt_gpu);
  CHECK(t_gpu.labels.is_cuda());
  CHECK(t_gpu.labels.to_vector<int64_t>() == t_cpu.labels.to_vector<int64_t>());
  CHECK(test::allclose(t_gpu.regression.cpu(), t_cpu.regression, 1e-5, 1e-6));

  const RPNLosses l_cpu = setup_losses(on_cpu, Device::cpu(), 5, on_cpu.features);
  const RPNLosses l_gpu = setup_losses(on_gpu, Device::cuda(), 5, on_gpu.features.cuda());
  CHECK(l_gpu.objectness.is_cuda());
  CHECK(test::allclose(l_gpu.objectness.detach().cpu(), l_cpu.objectness.detach(), 1e-4, 1e-6));
  CHECK(test::allclose(l_gpu.box.detach().cpu(), l_cpu.box.detach(), 1e-4, 1e-6));
  (l_cpu.objectness + l_cpu.box).backward();
  (l_gpu.objectness + l_gpu.box).backward();
  const nn::NamedTensors p_cpu = on_cpu.head.named_parameters(), p_gpu = on_gpu.head.named_parameters();
  for (size_t i = 0; i < p_cpu.size(); ++i) {
    CAPTURE(p_cpu[i].first);
    CHECK(test::allclose(p_gpu[i].second.grad().cpu(), p_cpu[i].second.grad(), 1e-3, 1e-5));
  }
}
