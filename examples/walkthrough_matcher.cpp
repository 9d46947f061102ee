// walkthrough_matcher: how Faster R-CNN decides which anchors learn what, on a toy image.
//
// Two objects and eight anchors on a 64 x 64 image. The program prints
//   1. the IoU matrix (objects x anchors), computed here with a plain loop so every number can be checked;
//   2. the Matcher's output without and with low-quality matches: which object each anchor matches and
//      whether it is foreground (1), background (0) or ignored (-1), and why;
//   3. the BalancedPositiveNegativeSampler's choice of a training sample of 4 anchors at most half positive,
//      for two seeds, to show it is random but reproducible.
//
//   walkthrough_matcher [--device cpu|cuda] [--seed 1]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/cuda/availability.h"
#include "core/factories.h"
#include "models/matcher/matcher.h"
#include "models/sampler/sampler.h"

using namespace minidet;

namespace {

struct Box {
  double x1, y1, x2, y2;
};

double iou(const Box& a, const Box& b) {
  const double w = std::max(0.0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const double h = std::max(0.0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const double inter = w * h;
  const double area_a = (a.x2 - a.x1) * (a.y2 - a.y1), area_b = (b.x2 - b.x1) * (b.y2 - b.y1);
  return inter / (area_a + area_b - inter);
}

void print_row(const char* name, const std::vector<int64_t>& values) {
  std::printf("  %-9s", name);
  for (int64_t v : values) std::printf(" %5lld", static_cast<long long>(v));
  std::printf("\n");
}

void print_mask(const char* name, const Tensor& mask) {
  std::printf("  %-9s", name);
  for (bool on : mask.to_vector<bool>()) std::printf(" %5s", on ? "x" : ".");
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"How anchors are matched to objects and sampled for training"};
  std::string device_name = "cpu";
  uint64_t seed = 1;
  app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--seed", seed, "seed of the sampler's generator");
  CLI11_PARSE(app, argc, argv);
  if (device_name == "cuda" && !cuda::is_available()) {
    std::fprintf(stderr, "walkthrough_matcher: no CUDA device available\n");
    return 1;
  }
  const Device device = device_name == "cuda" ? Device::cuda() : Device::cpu();

  const std::vector<Box> objects = {{8, 8, 32, 32}, {36, 20, 60, 36}};
  const std::vector<Box> anchors = {{8, 8, 32, 32},   {12, 8, 36, 32}, {0, 0, 24, 24},  {40, 40, 64, 64},
                                    {36, 16, 60, 40}, {32, 16, 64, 40}, {44, 24, 52, 32}, {0, 40, 16, 56}};
  const int64_t m = static_cast<int64_t>(objects.size()), n = static_cast<int64_t>(anchors.size());
  std::vector<double> q;
  for (const Box& o : objects)
    for (const Box& a : anchors) q.push_back(iou(o, a));
  const Tensor quality = from_vector<double>(q, {m, n}).to(TensorOptions(kFloat32, device));

  std::printf("1. IoU of each object (row) with each anchor (column), boxes (x1, y1, x2, y2):\n");
  for (int64_t g = 0; g < m; ++g) {
    std::printf("  object %lld", static_cast<long long>(g));
    for (int64_t a = 0; a < n; ++a) std::printf(" %5.2f", q[g * n + a]);
    std::printf("\n");
  }

  std::printf("\n2. Matcher(high 0.7, low 0.3): per anchor, the best object and its label\n"
              "   (IoU >= 0.7: 1 foreground; 0.3 <= IoU < 0.7: -1 ignored; IoU < 0.3: 0 background)\n");
  std::printf("  %-9s", "anchor");
  for (int64_t a = 0; a < n; ++a) std::printf(" %5lld", static_cast<long long>(a));
  std::printf("\n");
  const models::MatchResult strict = models::Matcher(0.7, 0.3, false)(quality);
  print_row("matches", strict.matches.to_vector<int64_t>());
  print_row("labels", strict.labels.to_vector<int64_t>());
  std::printf("   Object 1's best anchor (4) reaches only IoU %.2f, so object 1 has no foreground anchor.\n"
              "   With allow_low_quality_matches every object's best anchors (all ties) become foreground:\n",
              q[1 * n + 4]);
  const models::MatchResult relaxed = models::Matcher(0.7, 0.3, true)(quality);
  print_row("labels", relaxed.labels.to_vector<int64_t>());

  std::printf("\n3. BalancedPositiveNegativeSampler(4 per image, 0.5 positive) on those labels:\n"
              "   at most 2 foreground, the rest background, each chosen uniformly at random.\n");
  const models::BalancedPositiveNegativeSampler sampler(4, 0.5);
  for (uint64_t s : {seed, seed, seed + 1}) {
    Generator generator(s);
    const models::SampledMasks sample = sampler(relaxed.labels, &generator);
    std::printf("   seed %llu:\n", static_cast<unsigned long long>(s));
    print_mask("positive", sample.positive);
    print_mask("negative", sample.negative);
  }
  std::printf("   The same seed gives the same sample (on the CPU and on CUDA alike); another seed another.\n");
  return 0;
}
