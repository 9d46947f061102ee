// walkthrough_box_iou: one IoU, forward and backward, by hand and through minidet::box_iou.
//
//   walkthrough_box_iou [--a x1,y1,x2,y2] [--b x1,y1,x2,y2]
//
// 1. Forward: the two areas, the overlap rectangle (max of the left/top edges, min of the right/bottom
//    edges, clamped at 0), intersection, union and IoU, each printed as it is computed.
// 2. Backward: dIoU/dI = (1 + IoU) / U and dIoU/darea = -IoU / U, then each coordinate's derivative as the
//    sum of its path through the overlap and its path through its own area (box_iou.h has the formulas).
//    Printed next to minidet's fused backward kernel and a central finite difference.
// 3. The edge cases the policy fixes: touching, zero-area and identical boxes.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <vector>

#include "core/factories.h"
#include "ops/boxes/box_iou.h"

using namespace minidet;

namespace {

double iou_of(const std::vector<double>& a, const std::vector<double>& b) {
  return box_iou(from_vector<double>(a, {1, 4}), from_vector<double>(b, {1, 4})).item<double>();
}

void print_box(const char* name, const std::vector<double>& box) {
  std::printf("  %s = (x1 %g, y1 %g, x2 %g, y2 %g)\n", name, box[0], box[1], box[2], box[3]);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"box IoU forward and backward, step by step"};
  std::vector<double> a = {0, 0, 4, 3}, b = {2, 1, 7, 5};
  app.add_option("--a", a, "first box x1,y1,x2,y2")->expected(4)->delimiter(',');
  app.add_option("--b", b, "second box x1,y1,x2,y2")->expected(4)->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  std::printf("1. Forward\n");
  print_box("a", a);
  print_box("b", b);
  const double wa = std::max(a[2] - a[0], 0.0), ha = std::max(a[3] - a[1], 0.0);
  const double wb = std::max(b[2] - b[0], 0.0), hb = std::max(b[3] - b[1], 0.0);
  std::printf("  area_a = %g x %g = %g,   area_b = %g x %g = %g\n", wa, ha, wa * ha, wb, hb, wb * hb);
  const double left = std::max(a[0], b[0]), top = std::max(a[1], b[1]);
  const double right = std::min(a[2], b[2]), bottom = std::min(a[3], b[3]);
  const double iw = std::max(right - left, 0.0), ih = std::max(bottom - top, 0.0);
  std::printf("  overlap: x in [max(%g, %g), min(%g, %g)] = [%g, %g] -> iw = %g\n", a[0], b[0], a[2], b[2], left,
              right, iw);
  std::printf("           y in [max(%g, %g), min(%g, %g)] = [%g, %g] -> ih = %g\n", a[1], b[1], a[3], b[3], top,
              bottom, ih);
  const double inter = iw * ih, uni = wa * ha + wb * hb - inter;
  const double iou = inter > 0 ? inter / uni : 0.0;
  std::printf("  I = %g,  U = area_a + area_b - I = %g,  IoU = I / U = %.6f   (minidet::box_iou: %.6f)\n\n", inter,
              uni, iou, iou_of(a, b));

  std::printf("2. Backward of IoU with respect to a\n");
  if (!(inter > 0)) {
    std::printf("  the boxes do not overlap: IoU is the constant 0 around them, every derivative is 0\n\n");
  } else {
    const double d_inter = (1 + iou) / uni, d_area = -iou / uni;
    std::printf("  dIoU/dI = (1 + IoU) / U = %.6f,   dIoU/darea_a = -IoU / U = %.6f\n", d_inter, d_area);
    // Which box owns each overlap edge: all of it, or half on a tie.
    const auto share = [](double mine, double other, bool is_max) {
      return mine == other ? 0.5 : ((is_max ? mine > other : mine < other) ? 1.0 : 0.0);
    };
    const double overlap_part[4] = {-d_inter * ih * share(a[0], b[0], true), -d_inter * iw * share(a[1], b[1], true),
                                    d_inter * ih * share(a[2], b[2], false), d_inter * iw * share(a[3], b[3], false)};
    const double area_part[4] = {-d_area * ha, -d_area * wa, d_area * ha, d_area * wa};
    const Tensor leaf = from_vector<double>(a, {1, 4}).requires_grad_();
    box_iou(leaf, from_vector<double>(b, {1, 4})).backward(ones({1, 1}, kFloat64));
    const std::vector<double> kernel = leaf.grad().to_vector<double>();
    const char* names[4] = {"x1", "y1", "x2", "y2"};
    std::printf("  %-4s %14s %14s %12s %12s %14s\n", "a.", "via overlap", "via area_a", "sum", "kernel", "finite diff");
    for (int c = 0; c < 4; ++c) {
      std::vector<double> plus = a, minus = a;
      plus[c] += 1e-6;
      minus[c] -= 1e-6;
      const double numeric = (iou_of(plus, b) - iou_of(minus, b)) / 2e-6;
      std::printf("  %-4s %14.6f %14.6f %12.6f %12.6f %14.6f\n", names[c], overlap_part[c] + 0.0, area_part[c] + 0.0,
                  overlap_part[c] + area_part[c], kernel[c], numeric);
    }
    std::printf("  (an edge of a that is not an edge of the overlap only acts through area_a: growing a lowers IoU)\n\n");
  }

  std::printf("3. Edge cases (IoU is never 0/0)\n");
  std::printf("  touching  (0,0,2,2) vs (2,0,4,2): %g\n", iou_of({0, 0, 2, 2}, {2, 0, 4, 2}));
  std::printf("  zero area (1,1,1,5) vs itself:    %g\n", iou_of({1, 1, 1, 5}, {1, 1, 1, 5}));
  std::printf("  contained (0,0,4,4) vs (1,1,2,2): %g\n", iou_of({0, 0, 4, 4}, {1, 1, 2, 2}));
  const Tensor c = from_vector<double>({0, 0, 2, 2}, {1, 4}).requires_grad_();
  const Tensor d = from_vector<double>({0, 0, 2, 2}, {1, 4}).requires_grad_();
  box_iou(c, d).backward(ones({1, 1}, kFloat64));
  const std::vector<double> gc = c.grad().to_vector<double>();
  std::printf("  identical boxes: IoU %g; every overlap edge is shared, so each box gets half of its overlap\n"
              "  gradient, which exactly cancels its area term: dIoU/dc = (%g, %g, %g, %g)\n",
              iou_of({0, 0, 2, 2}, {0, 0, 2, 2}), gc[0], gc[1], gc[2], gc[3]);
  return 0;
}
