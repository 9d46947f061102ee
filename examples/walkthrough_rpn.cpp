// walkthrough_rpn: the Region Proposal Network on one synthetic image, stage by stage, then trained.
//
// One 64 x 64 image with one object, and in place of a backbone a fixed feature map of 8 channels at stride 8
// (8 x 8 cells): N(0, 1) noise plus a bump on channel 0 over the cells the object covers. The program prints
//   1. the anchors: 9 per cell (sizes 16, 32, 64 x ratios 0.5, 1, 2), their count and the best match;
//   2. the head's outputs, as maps and flattened into the anchors' order;
//   3. the proposals of the untrained head: top-k, decode, clip, small boxes, NMS, top-k;
//   4. training of the head alone with Adam: both losses, and the IoU of the best-scoring proposal (and of
//      the best of all proposals) with the object rising as the head learns where the object is and how to
//      move its anchors onto it.
//
//   walkthrough_rpn [--device cpu|cuda] [--seed 1] [--steps 60] [--lr 0.01]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cuda/availability.h"
#include "core/factories.h"
#include "models/rpn/rpn.h"
#include "nn/optim/adam.h"
#include "ops/boxes/box_iou.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/shape.h"

using namespace minidet;

namespace {

std::string box_text(const std::vector<double>& b, size_t row = 0) {
  char s[64];
  std::snprintf(s, sizeof s, "(%5.1f, %5.1f, %5.1f, %5.1f)", b[4 * row], b[4 * row + 1], b[4 * row + 2],
                b[4 * row + 3]);
  return s;
}

void print_shape(const char* what, const Tensor& t) {
  std::string s = "(";
  for (int64_t d = 0; d < t.dim(); ++d) s += std::to_string(t.size(d)) + (d + 1 < t.dim() ? ", " : "");
  std::printf("  %-46s %s)\n", what, s.c_str());
}

// IoU of each proposal with the object: (P) on the host.
std::vector<double> ious_with(const Tensor& proposals, const Tensor& object) {
  if (proposals.size(0) == 0) return {};
  return box_iou(proposals, object).select(1, 0).to_vector<double>();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The Region Proposal Network: anchors, head, proposals, losses, and a few training steps"};
  std::string device_name = "cpu";
  uint64_t seed = 1;
  int64_t steps = 60;
  double lr = 0.01;
  app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--seed", seed, "seed of the features, the head's weights and the sampler");
  app.add_option("--steps", steps, "Adam steps on the head")->check(CLI::NonNegativeNumber);
  app.add_option("--lr", lr, "Adam's learning rate")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (device_name == "cuda" && !cuda::is_available()) {
    std::fprintf(stderr, "walkthrough_rpn: no CUDA device available\n");
    return 1;
  }
  const Device device = device_name == "cuda" ? Device::cuda() : Device::cpu();
  const TensorOptions options(kFloat32, device);
  const std::array<int64_t, 2> image_size = {64, 64};
  const int64_t stride = 8, channels = 8, cells = 64 / stride;

  const std::vector<double> object_values = {18, 22, 45, 47};
  const Tensor object = from_vector<double>(object_values, {1, 4}).to(options);
  Generator gen(seed);
  // The bump: +2 on channel 0 over the cells (y, x) whose top-left corner (8x, 8y) lies in the object.
  std::vector<float> bump(static_cast<size_t>(channels * cells * cells), 0.0f);
  for (int64_t y = 0; y < cells; ++y)
    for (int64_t x = 0; x < cells; ++x)
      if (x * stride >= 16 && x * stride < 45 && y * stride >= 16 && y * stride < 47) bump[y * cells + x] = 2.0f;
  const Tensor features =
      add(randn({1, channels, cells, cells}, kFloat32, &gen), from_vector<float>(bump, {1, channels, cells, cells}))
          .to(device);

  models::RPNOptions o;
  o.in_channels = channels;
  o.feature_stride = stride;
  o.loss.batch_size_per_image = 64;
  o.train_proposals = {200, 50, 0.7, 1e-3, 0.0};
  o.test_proposals = {100, 10, 0.7, 1e-3, 0.0};
  o.generator = &gen;
  models::RPN rpn(o);
  rpn.to(device);

  // 1. Anchors.
  std::printf("1. Anchors: %lld per cell (sizes 16, 32, 64 x aspect ratios 0.5, 1, 2) on %lld x %lld cells\n",
              static_cast<long long>(rpn.head->num_anchors), static_cast<long long>(cells),
              static_cast<long long>(cells));
  print_shape("features (N, F, H/8, W/8)", features);
  const Tensor anchors = rpn.anchors(image_size, features);
  print_shape("anchors (h*w*A, 4), cached", anchors);
  const ValuesIndices best_anchor = max(box_iou(anchors, object).select(1, 0), 0);
  const int64_t a = best_anchor.indices.item<int64_t>();
  std::printf("  the object %s; its best anchor #%lld %s, IoU %.3f\n", box_text(object_values).c_str(),
              static_cast<long long>(a), box_text(anchors.narrow(0, a, 1).to_vector<double>()).c_str(),
              best_anchor.values.item<double>());

  // 2. The head.
  std::printf("\n2. The head: conv3x3 + ReLU, then one 1x1 conv per output\n");
  {
    NoGradGuard no_grad;
    const models::RPNHeadOutput out = (*rpn.head)(features);
    print_shape("objectness (N, A, h, w)", out.objectness);
    print_shape("deltas (N, 4A, h, w)", out.deltas);
    print_shape("flatten_objectness (N, h*w*A), anchor order", models::flatten_objectness(out.objectness));
    print_shape("flatten_deltas (N, h*w*A, 4)", models::flatten_deltas(out.deltas));
  }

  // 3. Proposals of the untrained head.
  const auto report = [&](const char* when, int64_t shown) {
    // One padded table (N, P, 4) and the counts: this image's proposals are the first counts[0] rows.
    const models::PaddedProposals table = rpn.forward_infer(features, image_size, {image_size});
    const Tensor proposals = table.boxes.select(0, 0).narrow(0, 0, table.counts.to_vector<int64_t>()[0]);
    const std::vector<double> boxes = proposals.to_vector<double>(), ious = ious_with(proposals, object);
    std::printf("  %s: %lld proposals\n", when, static_cast<long long>(proposals.size(0)));
    for (int64_t p = 0; p < std::min<int64_t>(shown, proposals.size(0)); ++p)
      std::printf("    #%lld %s  IoU with the object %.3f\n", static_cast<long long>(p), box_text(boxes, p).c_str(),
                  ious[p]);
  };
  std::printf("\n3. Proposals: top 100 by objectness, decode, clip, drop small, NMS at 0.7, top 10\n");
  report("untrained (objectness ~ 0 and deltas ~ 0: clipped anchors in near-arbitrary order)", 3);

  // 4. Training.
  std::printf("\n4. Training the head with Adam (lr %g) on the fixed features\n", lr);
  nn::Adam adam({{rpn.parameters(), lr}});
  for (int64_t step = 0; step <= steps; ++step) {
    Generator sampling(seed + 100 + step);
    const models::RPNTrainOutput out = rpn.forward_train(features, image_size, {image_size}, {object}, &sampling);
    const Tensor loss = add(out.losses.objectness, out.losses.box);
    if (step % std::max<int64_t>(1, steps / 10) == 0 || step == steps) {
      // The training proposals are one padded table: image 0's are its first counts[0] rows.
      const int64_t count = out.proposals.counts.to_vector<int64_t>()[0];
      const Tensor proposals = out.proposals.boxes.select(0, 0).narrow(0, 0, count);
      const std::vector<double> ious = ious_with(proposals, object);
      double best = 0;
      for (double v : ious) best = std::max(best, v);
      std::printf("  step %3lld  objectness %.4f  box %.4f  proposals %2lld  IoU: top-scoring %.3f, best %.3f\n",
                  static_cast<long long>(step), out.losses.objectness.item<double>(), out.losses.box.item<double>(),
                  static_cast<long long>(count), ious.empty() ? 0.0 : ious[0], best);
    }
    if (step == steps) break;
    adam.zero_grad();
    loss.backward();
    adam.step();
  }
  std::printf("\n");
  report("trained", 3);
  return 0;
}
