// walkthrough_nms: the bitmask NMS of py-faster-rcnn's nms_kernel.cu (docs/references.md), step by step, on
// 80 boxes (two blocks of 64).
//
//   walkthrough_nms [--boxes 80] [--threshold 0.5] [--seed 3]
//
// 1. The boxes are sorted by score (stable: ties keep input order) and cut into blocks of 64.
// 2. The mask: for box i and column block c, one 64-bit word whose bit k says "box i suppresses box 64c + k"
//    (IoU > threshold, only for 64c + k > i). It is printed in nms_kernel.cu's layout, one row per box, one
//    hexadecimal word per column block; tiles below the diagonal (c < i's block) are never computed.
// 3. The greedy pass: remv[c] collects the suppressed boxes of block c. Walking the boxes in score order, a
//    box whose bit is set in remv is skipped; any other box is kept and ORs its mask row into remv.
// The same mask and pass run inside minidet::nms on CUDA (ops/nms/nms_cuda.cu), there with the pass on the
// GPU too; the result is checked against minidet::nms at the end.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <vector>

#include "core/cuda/availability.h"
#include "core/factories.h"
#include "ops/nms/nms.h"
#include "ops/nms/nms_kernels.h"  // suppresses() and iou_above(): the one pair test both kernels use
#include "ops/sort/sort.h"

using namespace minidet;
using Word = unsigned long long;

int main(int argc, char** argv) {
  CLI::App app{"NMS with 64-bit masks, step by step"};
  int64_t n = 80;
  double threshold = 0.5;
  uint64_t seed = 3;
  app.add_option("--boxes", n, "number of boxes (65 to 128 shows two blocks)")->check(CLI::Range(1, 128));
  app.add_option("--threshold", threshold, "IoU threshold: suppress when IoU > threshold")->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", seed, "random seed");
  CLI11_PARSE(app, argc, argv);

  // Clusters of 4 jittered boxes, so that some boxes overlap strongly; scores uniform.
  Generator g(seed);
  std::vector<float> xyxy(4 * n), score(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t cluster = g.next_int(0, n / 4 + 1);
    const double cx = 40.0 * (cluster % 8) + 20, cy = 40.0 * (cluster / 8) + 20;
    const double jitter = 6 * g.next_uniform();
    xyxy[4 * i + 0] = float(cx - 15 + jitter);
    xyxy[4 * i + 1] = float(cy - 15 + 6 * g.next_uniform());
    xyxy[4 * i + 2] = float(cx + 15 + jitter);
    xyxy[4 * i + 3] = float(cy + 15);
    score[i] = float(g.next_int(0, 1000)) / 1000;
  }
  const Tensor boxes = from_vector(xyxy, {n, 4}), scores = from_vector(score);

  // 1. Score order.
  const std::vector<int64_t> order = argsort(scores, 0, /*descending=*/true).to_vector<int64_t>();
  const int64_t blocks = (n + 63) / 64;
  std::printf("%lld boxes, IoU threshold %.2f, %lld block(s) of 64 boxes. Position p in score order holds input box\n"
              "order[p]; from here on boxes are named by their position.\n\n",
              (long long)n, threshold, (long long)blocks);
  std::vector<float> sorted(4 * n), area(n);
  for (int64_t p = 0; p < n; ++p) {
    for (int c = 0; c < 4; ++c) sorted[4 * p + c] = xyxy[4 * order[p] + c];
    area[p] = box_math::box_area(&sorted[4 * p]);
  }

  // 2. The mask, as nms_mask_kernel computes it (64 threads per tile: thread t owns row 64r + t).
  std::vector<Word> mask(n * blocks, 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j)
      if (ops::detail::suppresses(&sorted[4 * i], area[i], &sorted[4 * j], area[j], float(threshold), 0.0f))
        mask[i * blocks + j / 64] |= Word(1) << (j % 64);
  std::printf("The mask: row p, one word per column block; bit k of word c = \"p suppresses box 64c + k\".\n");
  std::printf("%4s %6s %6s  %-26s", "p", "input", "score", "box (x1, y1, x2, y2)");
  for (int64_t c = 0; c < blocks; ++c) std::printf("  block %lld (boxes %lld..%lld)", (long long)c, (long long)(64 * c),
                                                   (long long)std::min<int64_t>(64 * c + 63, n - 1));
  std::printf("\n");
  for (int64_t i = 0; i < n; ++i) {
    std::printf("%4lld %6lld %6.3f  (%5.1f, %5.1f, %5.1f, %5.1f)", (long long)i, (long long)order[i], score[order[i]],
                sorted[4 * i], sorted[4 * i + 1], sorted[4 * i + 2], sorted[4 * i + 3]);
    for (int64_t c = 0; c < blocks; ++c) {
      if (c < i / 64)
        std::printf("  %-26s", "(below diagonal: skipped)");
      else
        std::printf("  0x%016llx%8s", mask[i * blocks + c], "");
    }
    std::printf("\n");
  }

  // 3. The greedy pass over the mask.
  std::printf("\nThe greedy pass. remv[c] = boxes of block c suppressed so far.\n");
  std::vector<Word> remv(blocks, 0);
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t block = i / 64, bit = i % 64;
    if ((remv[block] >> bit) & 1) {
      int64_t by = -1;  // the first kept box that suppresses i, for the printout
      for (int64_t k : kept)
        if ((mask[k * blocks + block] >> bit) & 1) {
          by = k;
          break;
        }
      std::printf("  p %3lld: bit %2lld of remv[%lld] is set -> removed (suppressed by kept p %lld)\n", (long long)i,
                  (long long)bit, (long long)block, (long long)by);
      continue;
    }
    kept.push_back(i);
    std::printf("  p %3lld: bit %2lld of remv[%lld] is clear -> KEEP input box %lld;", (long long)i, (long long)bit,
                (long long)block, (long long)order[i]);
    for (int64_t c = block; c < blocks; ++c) {
      remv[c] |= mask[i * blocks + c];
      std::printf(" remv[%lld] |= 0x%016llx ->", (long long)c, mask[i * blocks + c]);
      std::printf(" 0x%016llx%s", remv[c], c + 1 < blocks ? ";" : "");
    }
    std::printf("\n");
  }

  std::printf("\nKept input indices (in score order):");
  std::vector<int64_t> kept_inputs;
  for (int64_t p : kept) {
    kept_inputs.push_back(order[p]);
    std::printf(" %lld", (long long)order[p]);
  }
  bool agrees = nms(boxes, scores, threshold).to_vector<int64_t>() == kept_inputs;
  std::printf("\nminidet::nms on the CPU gives the same: %s\n", agrees ? "yes" : "NO");
  if (cuda::is_available()) {
    const bool gpu_agrees = nms(boxes.cuda(), scores.cuda(), threshold).cpu().to_vector<int64_t>() == kept_inputs;
    std::printf("minidet::nms on CUDA (mask and greedy pass on the GPU) gives the same: %s\n",
                gpu_agrees ? "yes" : "NO");
    agrees = agrees && gpu_agrees;
  }
  return agrees ? 0 : 1;
}
