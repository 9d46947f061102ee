// walkthrough_anchors: anchors, IoU matching and the box coder on one small image, the way an RPN sees
// its targets.
//
//   walkthrough_anchors [--gt x1,y1,x2,y2]
//
// 1. The cell anchors: sizes {16, 32} x ratios {0.5, 1, 2}, centred on (0, 0) and rounded like torchvision.
// 2. The grid: a 4 x 4 feature map of a 32 x 32 image (stride 8); anchors at every cell's top-left corner.
// 3. box_iou of the ground-truth box against every anchor; the best anchor.
// 4. BoxCoder.encode: the regression target (dx, dy, dw, dh) that moves the best anchor onto the ground
//    truth, and decode of that target, which gives the ground truth back. Then what the dw clamp does to a
//    wild prediction.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/factories.h"
#include "models/anchors/anchor_generator.h"
#include "models/box_coder/box_coder.h"
#include "ops/boxes/box_iou.h"

using namespace minidet;

int main(int argc, char** argv) {
  CLI::App app{"anchors, matching by IoU and the box coder, step by step"};
  std::vector<double> gt = {9, 5, 27, 16};
  app.add_option("--gt", gt, "ground-truth box x1,y1,x2,y2 inside the 32 x 32 image")->expected(4)->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  models::AnchorGenerator generator({{16, 32}}, {{0.5, 1.0, 2.0}});
  const int64_t per_cell = generator.num_anchors_per_location(0);
  std::printf("1. Cell anchors (ratio = h / w outer, size inner), centred on (0, 0):\n");
  const std::vector<float> cell = generator.cell_anchors(0).to_vector<float>();
  for (int64_t k = 0; k < per_cell; ++k)
    std::printf("   a%lld = (%4g, %4g, %4g, %4g)   %g x %g\n", (long long)k, cell[4 * k], cell[4 * k + 1],
                cell[4 * k + 2], cell[4 * k + 3], cell[4 * k + 2] - cell[4 * k], cell[4 * k + 3] - cell[4 * k + 1]);

  const Tensor anchors = generator.anchors(32, 32, {{4, 4}}, kFloat64);
  std::printf("\n2. Grid: 4 x 4 cells of a 32 x 32 image, stride 8 -> %lld anchors; row (y * 4 + x) * %lld + a\n",
              (long long)anchors.size(0), (long long)per_cell);

  const Tensor target = from_vector<double>(gt, {1, 4});
  const std::vector<double> iou = box_iou(target, anchors).to_vector<double>();
  int64_t best = 0;
  for (int64_t k = 1; k < anchors.size(0); ++k)
    if (iou[k] > iou[best]) best = k;
  const std::vector<double> anchor = anchors.narrow(0, best, 1).to_vector<double>();
  std::printf("\n3. IoU of the ground truth (%g, %g, %g, %g) with every anchor; the best is #%lld\n", gt[0], gt[1],
              gt[2], gt[3], (long long)best);
  std::printf("   (cell y %lld, x %lld, anchor a%lld) = (%g, %g, %g, %g) with IoU %.4f\n",
              (long long)(best / per_cell / 4), (long long)(best / per_cell % 4), (long long)(best % per_cell),
              anchor[0], anchor[1], anchor[2], anchor[3], iou[best]);

  const models::BoxCoder coder;  // the RPN's weights (1, 1, 1, 1)
  const Tensor best_anchor = anchors.narrow(0, best, 1);
  const Tensor deltas = coder.encode(target, best_anchor);
  const std::vector<double> d = deltas.to_vector<double>();
  std::printf("\n4. encode: dx = (gt_cx - a_cx) / a_w = %.4f, dy = %.4f, dw = log(gt_w / a_w) = %.4f, dh = %.4f\n",
              d[0], d[1], d[2], d[3]);
  const std::vector<double> back = coder.decode(deltas, best_anchor).to_vector<double>();
  std::printf("   decode(encode(gt)) = (%g, %g, %g, %g): the ground truth again\n", back[0], back[1], back[2], back[3]);
  const Tensor wild = from_vector<double>({0, 0, 10, 0}, {1, 4});
  const std::vector<double> clamped = coder.decode(wild, best_anchor).to_vector<double>();
  std::printf("   a wild dw = 10 is clamped at log(1000/16) = %.4f: width %g = %.1f x the anchor's, not e^10 x\n",
              coder.bbox_xform_clip(), clamped[2] - clamped[0], (clamped[2] - clamped[0]) / (anchor[2] - anchor[0]));
  return 0;
}
