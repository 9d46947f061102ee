// walkthrough_rrpn: the rotated RPN's training targets for one object, step by step: the rotation proposals
// of RRPN (Ma et al. 2018, "Arbitrary-Oriented Scene Text Detection via Rotation Proposals", arXiv:1703.01086)
// as minidet's detector makes them with detector.box_type = rotated (models/common/box_type.h).
//
//   walkthrough_rrpn [--object cx,cy,w,h,degrees] [--angles -90,-60,-30,0,30,60] [--sizes 16,32] [--ratios 0.25]
//
// One object on a 64 x 64 image whose feature map has 8 x 8 cells (stride 8). Boxes are (cx, cy, w, h, a),
// a in radians counter-clockwise on screen, normalised into [-pi/2, pi/2) (docs/rotated.md). It prints
//   1. the rotated anchors of the cell nearest the object (RotatedAnchorGenerator: ratios x sizes x angles)
//      and how many the grid has;
//   2. their IoU with the object (box_iou_rotated), the best anchors of the grid, and the labels of the RPN's
//      Matcher (0.7 / 0.3 with low-quality matches), with what the low-quality rule adds;
//   3. the positives' targets (dx, dy, dw, dh, da) by RotatedBoxCoder(1, 1, 1, 1, 1), decode(encode) == G,
//      and the wrap of da into [-pi/2, pi/2) on an angle difference of more than a quarter turn;
//   4. models::rpn_targets on the whole grid, checked equal to steps 2 and 3.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <numeric>
#include <vector>

#include "core/factories.h"
#include "models/anchors/rotated_anchor_generator.h"
#include "models/box_coder/rotated_box_coder.h"
#include "models/matcher/matcher.h"
#include "models/rpn/rpn_loss.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"

using namespace minidet;

namespace {

constexpr double kDegree = M_PI / 180.0;

// Row i of a (K, 5) host vector as "(cx, cy, w, h, a rad = d deg)".
void print_box(const std::vector<double>& boxes, int64_t i = 0) {
  const double* b = &boxes[5 * i];
  std::printf("(%5.1f, %5.1f, %5.1f, %5.1f, %+.4f rad = %+6.1f deg)", b[0], b[1], b[2], b[3], b[4], b[4] / kDegree);
}

const char* label_name(int64_t label) {
  return label == models::Matcher::kPositive   ? "positive"
         : label == models::Matcher::kNegative ? "negative"
                                               : "ignored";
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the rotated RPN's anchors, matching and 5-delta targets for one object, step by step"};
  std::vector<double> object = {30, 29, 44, 11, 20}, angles_degrees = {-90, -60, -30, 0, 30, 60};
  std::vector<double> sizes = {16, 32}, ratios = {0.25};
  app.add_option("--object", object, "the object cx,cy,w,h,angle (degrees, counter-clockwise) in the 64 x 64 image")
      ->expected(5)
      ->delimiter(',');
  app.add_option("--angles", angles_degrees, "anchor angles in degrees")->delimiter(',');
  app.add_option("--sizes", sizes, "anchor sizes (sqrt of the area) in pixels")->delimiter(',');
  app.add_option("--ratios", ratios, "anchor aspect ratios h / w")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  if (!(object[2] > 0 && object[3] > 0) ||
      !std::all_of(object.begin(), object.end(), [](double v) { return std::isfinite(v); })) {
    std::fprintf(stderr, "walkthrough_rrpn: --object needs finite values and w, h > 0 (the RPN's contract)\n");
    return 2;
  }
  const int64_t image = 64, stride = 8, cells = image / stride;
  std::vector<double> angles;
  for (double d : angles_degrees) angles.push_back(d * kDegree);
  // The ground truth with its angle in radians, normalised as every rotated block in minidet keeps it.
  const std::vector<double> gt = {object[0], object[1], object[2], object[3],
                                  models::normalize_angle(object[4] * kDegree)};
  const Tensor gt_box = from_vector<double>(gt, {1, 5});

  // 1. Anchors. The generator refuses angles that name the same box twice (a and a + k pi).
  std::unique_ptr<models::RotatedAnchorGenerator> made;
  try {
    made = std::make_unique<models::RotatedAnchorGenerator>(std::vector<std::vector<double>>{sizes},
                                                            std::vector<std::vector<double>>{ratios},
                                                            std::vector<std::vector<double>>{angles});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "walkthrough_rrpn: %s\n", e.what());
    return 2;
  }
  models::RotatedAnchorGenerator& generator = *made;
  const int64_t per_cell = generator.num_anchors_per_location(0), n_angles = static_cast<int64_t>(angles.size());
  const int64_t n_sizes = static_cast<int64_t>(sizes.size());
  const Tensor anchors = generator.anchors(image, image, {{cells, cells}}, kFloat64);
  const int64_t total = anchors.size(0);
  const std::vector<double> boxes = anchors.to_vector<double>();
  // Anchors are centred on their cell's top-left corner (x stride, y stride): take the cell nearest G's centre.
  const int64_t cell_x = std::clamp<int64_t>(std::llround(gt[0] / stride), 0, cells - 1);
  const int64_t cell_y = std::clamp<int64_t>(std::llround(gt[1] / stride), 0, cells - 1);
  const int64_t first = (cell_y * cells + cell_x) * per_cell;
  std::printf("The object G = ");
  print_box(gt);
  std::printf(
      "\n\n1. Anchors of cell (y %lld, x %lld), the one nearest G, centred on (%lld, %lld):\n"
      "   %zu ratio(s) x %lld size(s) x %lld angles = %lld, index k = (ratio * %lld + size) * %lld + angle\n",
      (long long)cell_y, (long long)cell_x, (long long)(cell_x * stride), (long long)(cell_y * stride), ratios.size(),
      (long long)n_sizes, (long long)n_angles, (long long)per_cell, (long long)n_sizes, (long long)n_angles);
  for (int64_t k = 0; k < per_cell; ++k) {
    std::printf("   a%-3lld ratio %-5g size %-4g ", (long long)k, ratios[k / n_angles / n_sizes],
                sizes[k / n_angles % n_sizes]);
    print_box(boxes, first + k);
    std::printf("\n");
  }
  std::printf(
      "   The grid: %lld x %lld cells x %lld = %lld anchors, row (y * %lld + x) * %lld + k (the head's order)\n",
      (long long)cells, (long long)cells, (long long)per_cell, (long long)total, (long long)cells, (long long)per_cell);

  // 2. IoU and the Matcher, with the RPN's own thresholds.
  const models::RPNLossOptions rpn;
  const Tensor quality = box_iou_rotated(gt_box, anchors);  // (1, K): the Matcher's (objects, anchors) layout
  const std::vector<double> iou = quality.to_vector<double>();
  std::printf(
      "\n2. IoU with G (box_iou_rotated: exact polygon clipping). At cell (%lld, %lld), one column per angle:\n"
      "   %-24s",
      (long long)cell_y, (long long)cell_x, "");
  for (double a : generator.angles(0)) std::printf(" %+6.0f", a / kDegree);
  for (int64_t row = 0; row < per_cell / n_angles; ++row) {
    std::printf("\n   ratio %-5g size %-4g   ", ratios[row / n_sizes], sizes[row % n_sizes]);
    for (int64_t t = 0; t < n_angles; ++t) std::printf(" %6.3f", iou[first + row * n_angles + t]);
  }
  const models::MatchResult match = models::Matcher(rpn.fg_iou_threshold, rpn.bg_iou_threshold, true)(quality);
  const models::MatchResult strict = models::Matcher(rpn.fg_iou_threshold, rpn.bg_iou_threshold, false)(quality);
  const std::vector<int64_t> labels = match.labels.to_vector<int64_t>(),
                             strict_labels = strict.labels.to_vector<int64_t>();
  std::vector<int64_t> order(total);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return iou[i] > iou[j]; });
  std::printf(
      "\n   The best of all %lld anchors, and the Matcher's labels (IoU >= %g positive, < %g negative, else "
      "ignored):\n",
      (long long)total, rpn.fg_iou_threshold, rpn.bg_iou_threshold);
  for (int64_t r = 0; r < std::min<int64_t>(6, total); ++r) {
    const int64_t i = order[r];
    std::printf("   #%-4lld cell (%lld, %lld) a%-3lld ", (long long)i, (long long)(i / per_cell / cells),
                (long long)(i / per_cell % cells), (long long)(i % per_cell));
    print_box(boxes, i);
    std::printf("  IoU %.4f  %s\n", iou[i], label_name(labels[i]));
  }
  int64_t count[3] = {0, 0, 0}, strict_positives = 0;  // ignored, negative, positive
  for (int64_t i = 0; i < total; ++i) ++count[labels[i] + 1], strict_positives += strict_labels[i] == 1;
  std::printf("   labels: %lld positive, %lld ignored, %lld negative\n", (long long)count[2], (long long)count[0],
              (long long)count[1]);
  if (strict_positives < count[2])
    std::printf(
        "   No anchor reaches %g: by the thresholds alone G would have %lld positives and the RPN nothing to\n"
        "   regress onto it. allow_low_quality_matches (Faster R-CNN's rule) makes the anchors of G's best IoU,\n"
        "   %.4f, positive anyway: the %lld above. RRPN also asks a positive to lie within pi/12 of G's angle;\n"
        "   minidet, like detectron2, relies on IoU alone, which for a long box already falls fast with the angle.\n",
        rpn.fg_iou_threshold, (long long)strict_positives, iou[order[0]], (long long)(count[2] - strict_positives));

  // 3. Regression targets of the positives, first from the formulas, then from the coder.
  const models::RotatedBoxCoder coder({rpn.box_coder_weights[0], rpn.box_coder_weights[1], rpn.box_coder_weights[2],
                                       rpn.box_coder_weights[3], rpn.box_coder_angle_weight});
  std::printf(
      "\n3. Targets of the positives, RotatedBoxCoder weights (1, 1, 1, 1, 1) as the RPN's; the centre offsets\n"
      "   are in image axes, scaled by the anchor's w and h but not turned with it (RRPN, detectron2)\n");
  std::vector<double> by_hand(static_cast<size_t>(total) * 5, 0.0);
  bool ok = true;
  int64_t shown = 0;  // every positive is checked, the first 3 are printed
  for (int64_t i = 0; i < total; ++i) {
    if (labels[i] != models::Matcher::kPositive) continue;
    const double* p = &boxes[5 * i];
    double* d = &by_hand[5 * i];
    d[0] = (gt[0] - p[0]) / p[2], d[1] = (gt[1] - p[1]) / p[3];
    d[2] = std::log(gt[2] / p[2]), d[3] = std::log(gt[3] / p[3]);
    d[4] = models::normalize_angle(gt[4] - p[4]);
    const Tensor anchor = anchors.narrow(0, i, 1);
    const std::vector<double> coded = coder.encode(gt_box, anchor).to_vector<double>();
    const std::vector<double> back = coder.decode(from_vector<double>(coded, {1, 5}), anchor).to_vector<double>();
    const double coder_error = max_abs_difference(coded, {d, d + 5}), round_trip = max_abs_difference(back, gt);
    ok = ok && coder_error <= 1e-12 && round_trip <= 1e-12;
    if (++shown > 3) continue;
    std::printf("   anchor #%lld ", (long long)i);
    print_box(boxes, i);
    std::printf("\n     dx = (Gcx - Acx) / Aw = (%g - %g) / %g = %+.4f    dy = (%g - %g) / %g = %+.4f\n", gt[0], p[0],
                p[2], d[0], gt[1], p[1], p[3], d[1]);
    std::printf("     dw = log(Gw / Aw) = log(%g / %g) = %+.4f      dh = log(%g / %g) = %+.4f\n", gt[2], p[2], d[2],
                gt[3], p[3], d[3]);
    std::printf("     da = normalize_angle(Ga - Aa) = normalize_angle(%+.1f deg) = %+.4f rad = %+.1f deg\n",
                (gt[4] - p[4]) / kDegree, d[4], d[4] / kDegree);
    std::printf("     encode: the same to %.1e; decode(encode(G, A), A) = G to %.1e\n", coder_error, round_trip);
  }
  if (shown > 3) std::printf("   (and %lld more positives, checked the same way)\n", (long long)(shown - 3));
  if (shown == 0) std::printf("   none: G overlaps no anchor, and a best IoU of 0 makes no low-quality match\n");
  // The wrap. The anchor of G's cell farthest from G in angle, when Ga - Aa falls outside [-pi/2, pi/2);
  // otherwise G itself written with angle Ga - pi or Ga + pi (the same box, as a dataset might write it),
  // which puts the difference outside.
  int64_t far = first;
  for (int64_t k = 0; k < per_cell; ++k)
    if (std::fabs(gt[4] - boxes[5 * (first + k) + 4]) > std::fabs(gt[4] - boxes[5 * far + 4])) far = first + k;
  std::vector<double> described = gt;
  const double far_angle = boxes[5 * far + 4];
  if (gt[4] - far_angle >= -M_PI / 2 && gt[4] - far_angle < M_PI / 2) described[4] += gt[4] >= far_angle ? -M_PI : M_PI;
  const double raw = described[4] - far_angle, da = models::normalize_angle(raw);
  const Tensor far_anchor = anchors.narrow(0, far, 1);
  const Tensor wrapped = coder.encode(from_vector<double>(described, {1, 5}), far_anchor);
  const double coded_da = wrapped.to_vector<double>()[4];
  const std::vector<double> back = coder.decode(wrapped, far_anchor).to_vector<double>();
  std::printf(
      "   The wrap: G, written with angle Ga = %+.1f deg%s, against a%lld of cell (%lld, %lld) at %+.1f deg:\n"
      "   Ga - Aa = %+.1f deg, outside [-90, 90). A box turned by pi is the same box, so turning the\n"
      "   anchor by %+.1f deg or by %+.1f deg gives the same box (%+.1f deg normalises to %+.1f), and\n"
      "   normalize_angle keeps the short turn: da = %+.4f rad = %+.1f deg (encode: %+.4f). A target never\n"
      "   asks for more than a quarter turn either way (RRPN keeps it in one period of pi too).\n",
      described[4] / kDegree, described[4] == gt[4] ? "" : " (the same box as G)", (long long)(far - first),
      (long long)cell_y, (long long)cell_x, far_angle / kDegree, raw / kDegree, raw / kDegree, da / kDegree,
      (far_angle + da) / kDegree, models::normalize_angle(far_angle + da) / kDegree, da, da / kDegree, coded_da);
  const double wrap_error = std::max(max_abs_difference(back, gt), std::fabs(coded_da - da));
  ok = ok && wrap_error <= 1e-12;
  std::printf("   decode(encode) gives G back, angle %+.4f rad, to %.1e\n", back[4], wrap_error);

  // 4. The library's own targets on the whole grid.
  const models::RPNTargets targets = models::rpn_targets(anchors, {gt_box}, rpn);
  const bool same_labels = targets.labels.to_vector<int64_t>() == labels;
  const double regression_error = max_abs_difference(targets.regression.to_vector<double>(), by_hand);
  ok = ok && same_labels && regression_error <= 1e-12;
  std::printf(
      "\n4. models::rpn_targets(anchors (%lld, 5), {G (1, 5)}): labels %s;\n"
      "   regression (1, %lld, 5) equal to step 3 on the positives and 0 elsewhere to %.1e: %s\n",
      (long long)total, same_labels ? "the same on every anchor" : "DIFFER", (long long)total, regression_error,
      ok ? "every check passes" : "A CHECK FAILED");
  return ok ? 0 : 1;
}
