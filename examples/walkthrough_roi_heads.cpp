// walkthrough_roi_heads: the second stage of Faster R-CNN on a toy image, step by step.
//
// One 64 x 64 image with two objects and six proposals, features of 4 channels at stride 4. The program
// prints
//   1. target assignment: each candidate (the proposals, then the objects themselves), its best IoU, its
//      class, whether the sampler took it, and its regression target (10, 10, 5, 5-weighted deltas);
//   2. the box head's shapes: RoIAlign 7x7 -> two FC layers -> class logits and class-specific deltas;
//   3. the two losses, then where their gradient lands: every logit of a sampled row, only the 4 delta
//      columns of a positive row's own class, and the feature map under the rois (through RoIAlign);
//   4. inference on hand-set head outputs: softmax, decode, clip, the score threshold, per-class NMS.
//
//   walkthrough_roi_heads [--device cpu|cuda] [--seed 1] [--batch 4]
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "core/cuda/availability.h"
#include "core/factories.h"
#include "models/common/padded_proposals.h"
#include "models/roi_heads/roi_heads.h"
#include "ops/boxes/box_iou.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/shape.h"

using namespace minidet;

namespace {

std::string box_text(const double* b) {
  char s[64];
  std::snprintf(s, sizeof s, "(%4.1f, %4.1f, %4.1f, %4.1f)", b[0], b[1], b[2], b[3]);
  return s;
}

void print_shape(const char* what, const Tensor& t) {
  std::string s = "(";
  for (int64_t d = 0; d < t.dim(); ++d) s += std::to_string(t.size(d)) + (d + 1 < t.dim() ? ", " : ")");
  std::printf("  %-42s %s\n", what, s.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The RoI heads of Faster R-CNN: targets, box head, losses, gradients and inference"};
  std::string device_name = "cpu";
  uint64_t seed = 1;
  int64_t batch = 4;
  app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--seed", seed, "seed of the sampler's generator and of the weights");
  app.add_option("--batch", batch, "RoIs sampled per image (torchvision: 512, the tiny detector: 128)");
  CLI11_PARSE(app, argc, argv);
  if (device_name == "cuda" && !cuda::is_available()) {
    std::fprintf(stderr, "walkthrough_roi_heads: no CUDA device available\n");
    return 1;
  }
  const Device device = device_name == "cuda" ? Device::cuda() : Device::cpu();
  const TensorOptions options(kFloat32, device);

  // Object 0: class 2, object 1: class 1. Proposals: two good fits, a half fit, two misses, one near miss.
  const std::vector<double> objects = {8, 8, 32, 32, 36, 20, 60, 36};
  const std::vector<double> proposal_values = {10, 9, 33, 30, 37, 22, 58, 38, 8, 8, 32, 20,
                                               40, 40, 64, 64, 0, 44, 14, 60, 30, 18, 52, 34};
  const Tensor gt_boxes = from_vector<double>(objects, {2, 4}).to(options);
  const Tensor gt_labels = from_vector<int64_t>({2, 1}).to(device);
  const Tensor proposals = from_vector<double>(proposal_values, {6, 4}).to(options);

  models::RoIHeadsOptions o;
  o.in_channels = 4;
  o.num_classes = 2;
  o.feature_stride = 4;
  o.representation_size = 16;
  o.batch_size_per_image = batch;
  Generator init(seed);
  o.generator = &init;
  models::RoIHeads heads(o);
  heads.to(device);

  // 1. Target assignment, as RoIHeads::forward_train makes it: from the proposals as one padded table (the
  // RPN's training output; pad_proposals builds it from a list), N = 1 image here.
  Generator sample_gen(seed);
  const models::RoISample s =
      models::sample_rois_padded(models::pad_proposals({proposals}), {gt_boxes}, {gt_labels}, o, &sample_gen);
  const Tensor candidates = cat({proposals, gt_boxes}, 0);
  const std::vector<double> best_iou = max(box_iou(gt_boxes, candidates), 0).values.to_vector<double>();
  const std::vector<double> cand = candidates.to_vector<double>();
  std::printf("1. Candidates = the 6 proposals + the 2 objects; IoU >= 0.5 with an object: its class, else 0\n");
  for (size_t i = 0; i < best_iou.size(); ++i)
    std::printf("  %s %s  best IoU %.2f -> %s\n", i < 6 ? "proposal" : "object  ", box_text(&cand[4 * i]).c_str(),
                best_iou[i], best_iou[i] >= 0.5 ? "foreground" : "background");
  std::printf("   sampled: %lld slots = min(batch %lld, 8 candidates), at most %lld positive (fraction 0.25)\n",
              static_cast<long long>(s.rois.size(0)), static_cast<long long>(batch),
              static_cast<long long>(batch / 4));
  const std::vector<double> rois = s.rois.to_vector<double>(), targets = s.regression_targets.to_vector<double>();
  const std::vector<int64_t> labels = s.labels.to_vector<int64_t>();
  const std::vector<bool> valid = s.valid.to_vector<bool>();
  for (int64_t k = 0; k < s.rois.size(0); ++k)
    std::printf("  slot %lld  roi %s  label %lld  %s  target (%6.3f, %6.3f, %6.3f, %6.3f)\n",
                static_cast<long long>(k), box_text(&rois[5 * k + 1]).c_str(), static_cast<long long>(labels[k]),
                valid[k] ? "sampled" : "padding", targets[4 * k], targets[4 * k + 1], targets[4 * k + 2],
                targets[4 * k + 3]);

  // 2. The box head.
  Generator feature_gen(seed + 1);
  const Tensor features = randn({1, 4, 16, 16}, kFloat32, &feature_gen).to(device).requires_grad_();
  std::printf("\n2. Box head shapes\n");
  print_shape("features (N, F, H/4, W/4)", features);
  print_shape("rois (K, 5)", s.rois);
  print_shape("fc6 weight (R, F*7*7): pooled 7x7 flattened", heads.box_head->fc6->weight);
  const models::BoxHeadOutput head = heads.forward_box_head(features, s.rois);
  print_shape("class logits (K, C+1)", head.class_logits);
  print_shape("box deltas (K, 4(C+1))", head.box_deltas);

  // 3. Losses and gradients.
  autograd::retain_grad(head.class_logits);  // keep the gradients of these two non-leaf tensors to print them
  autograd::retain_grad(head.box_deltas);
  const auto losses = models::roi_heads_loss(head, s);
  const Tensor total = add(losses.at("loss_classifier"), losses.at("loss_box_reg"));
  total.backward();
  std::printf("\n3. Losses: classifier %.4f (mean cross-entropy over sampled rows), box %.4f (smooth L1 on the\n"
              "   positives' own-class deltas, divided by the sampled count)\n",
              losses.at("loss_classifier").item<double>(), losses.at("loss_box_reg").item<double>());
  const std::vector<double> grad_deltas = head.box_deltas.grad().to_vector<double>();
  const std::vector<double> grad_logits = head.class_logits.grad().to_vector<double>();
  const int64_t columns = 4 * (o.num_classes + 1);
  for (int64_t k = 0; k < s.rois.size(0); ++k) {
    std::printf("  slot %lld label %lld  dL/dlogits (", static_cast<long long>(k), static_cast<long long>(labels[k]));
    for (int64_t c = 0; c <= o.num_classes; ++c) std::printf("%s%+.3f", c ? ", " : "", grad_logits[3 * k + c]);
    std::printf(")  dL/ddeltas non-zero in columns:");
    for (int64_t j = 0; j < columns; ++j)
      if (grad_deltas[columns * k + j] != 0.0) std::printf(" %lld", static_cast<long long>(j));
    std::printf("\n");
  }
  const Tensor feature_grad = features.grad();
  std::printf("  dL/dfeatures: |sum| %.4f over %lld of %lld cells (RoIAlign hands it to the 4 pixels around\n"
              "  each sample; cells under no roi get 0)\n",
              sum(abs(feature_grad)).item<double>(),
              static_cast<long long>(sum(gt(abs(sum(feature_grad, {1})), 0.0)).item<int64_t>()),
              static_cast<long long>(16 * 16));

  // 4. Inference on hand-set outputs: three rows, the third a shifted copy of the second.
  std::printf("\n4. Inference on 3 rois with hand-set probabilities (bg, class 1, class 2) and zero deltas\n");
  const std::vector<double> p = {0.15, 0.03, 0.82, 0.25, 0.72, 0.03, 0.36, 0.6, 0.04};
  std::vector<double> z;
  for (double v : p) z.push_back(std::log(v));  // softmax(log p) = p
  const Tensor rows = from_vector<double>({10, 9, 33, 30, 37, 22, 58, 38, 35, 21, 57, 37}, {3, 4}).to(options);
  for (int64_t r = 0; r < 3; ++r)
    std::printf("  row %lld %s  p = (%.2f, %.2f, %.2f)\n", static_cast<long long>(r),
                box_text(&rows.to_vector<double>()[4 * r]).c_str(), p[3 * r], p[3 * r + 1], p[3 * r + 2]);
  const models::BoxHeadOutput hand{from_vector<double>(z, {3, 3}).to(options), zeros({3, columns}, options)};
  const auto detections = models::postprocess_detections(hand, models::pad_proposals({rows}), {{64, 64}}, o);
  const std::vector<double> boxes = detections[0].boxes.to_vector<double>();
  const std::vector<double> scores = detections[0].scores.to_vector<double>();
  const std::vector<int64_t> classes = detections[0].labels.to_vector<int64_t>();
  std::printf("  background dropped, 3 (row, class) pairs above 0.05; row 2's class 1 overlaps row 1's\n"
              "  (IoU %.2f > 0.5) with a lower score, so NMS removes it (classes never suppress each other)\n",
              box_iou(rows.narrow(0, 1, 1), rows.narrow(0, 2, 1)).item<double>());
  for (size_t d = 0; d < scores.size(); ++d)
    std::printf("  detection %zu: class %lld score %.2f box %s\n", d, static_cast<long long>(classes[d]), scores[d],
                box_text(&boxes[4 * d]).c_str());
  return 0;
}
