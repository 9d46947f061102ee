// walkthrough_box_iou_rotated: the IoU of two rotated boxes, clipped step by step as ops/box_iou_rotated
// does it, then checked against minidet::box_iou_rotated.
//
//   walkthrough_box_iou_rotated [--a cx,cy,w,h,angle] [--b cx,cy,w,h,angle]     (angles in radians)
//
// 1. Corners: c ± (w/2)(cos a, -sin a) ± (h/2)(sin a, cos a) in the order p0..p3 whose shoelace area is +w*h.
// 2. Sutherland-Hodgman: a's quadrilateral is cut by the half-plane on the left of each of b's 4 edges in
//    turn. Each pass prints d of every vertex, which vertices are kept (d >= 0) and the crossings added
//    where d changes sign strictly, prev + t (cur - prev) with t = d_prev / (d_prev - d_cur).
// 3. The intersection's shoelace area, the union and the IoU; then the op's own IoU, and b turned by pi.
// The steps use rotated_box_math.h's own functions (box_corners, cross, clip_by_half_plane, polygon_area),
// so each step is the kernels' arithmetic; only the origin differs (the kernels work about a's centre, this
// walk in the image's coordinates, which can move the last bits). (Negative numbers: --b=-1,2,6,6,0.)
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "core/cuda/availability.h"
#include "core/factories.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"
#include "ops/box_iou_rotated/rotated_box_math.h"

using namespace minidet;
namespace rbm = minidet::rotated_box_math;
using Point = rbm::Point<double>;

namespace {

double op_iou(const std::vector<double>& a, const std::vector<double>& b) {
  return box_iou_rotated(from_vector<double>(a, {1, 5}), from_vector<double>(b, {1, 5})).item<double>();
}

void print_polygon(const Point* v, int n) {
  if (n == 0) std::printf("(empty)");
  for (int k = 0; k < n; ++k) std::printf("%s(%.6f, %.6f)", k ? ", " : "", v[k].x, v[k].y);
  std::printf("\n");
}

// Corners and area of one box, printed; the area is the same shoelace the intersection gets below.
double corners_of(const char* name, const std::vector<double>& box, Point* corners) {
  const double c = std::cos(box[4]), s = std::sin(box[4]);
  std::printf("  %s = (cx %g, cy %g, w %g, h %g, angle %g rad)\n", name, box[0], box[1], box[2], box[3], box[4]);
  std::printf("    half_u = (w/2)(cos a, -sin a) = (%.6f, %.6f),  half_v = (h/2)(sin a, cos a) = (%.6f, %.6f)\n",
              std::fabs(box[2]) / 2 * c, -std::fabs(box[2]) / 2 * s, std::fabs(box[3]) / 2 * s,
              std::fabs(box[3]) / 2 * c);
  rbm::box_corners(box[0], box[1], box[2], box[3], box[4], corners);
  const char* how[4] = {"c - half_u - half_v", "c + half_u - half_v", "c + half_u + half_v", "c - half_u + half_v"};
  for (int k = 0; k < 4; ++k) std::printf("    p%d = %s = (%.6f, %.6f)\n", k, how[k], corners[k].x, corners[k].y);
  const double area = rbm::polygon_area(corners, 4), wh = std::fabs(box[2] * box[3]);
  std::printf("    shoelace area %.12f, |w h| = %g: ", area, wh);
  if (area == wh) std::printf("the same\n");
  else std::printf("differ by %.3g (the rounding of sin and cos)\n", area - wh);
  return area;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rotated box IoU by polygon clipping, step by step"};
  std::vector<double> a = {10, 10, 8, 4, 0.3}, b = {12, 11, 6, 6, -0.5};
  app.add_option("--a", a, "first box cx,cy,w,h,angle (radians)")->expected(5)->delimiter(',');
  app.add_option("--b", b, "second box cx,cy,w,h,angle (radians)")->expected(5)->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  // The op gives NaN for a box with NaN or Inf in it; a walk through the geometry of such a box means nothing.
  for (const std::vector<double>* box : {&a, &b})
    for (double v : *box)
      if (!std::isfinite(v)) {
        std::fprintf(stderr, "walkthrough_box_iou_rotated: every value of --a and --b must be finite, got %g\n", v);
        return 2;
      }

  std::printf("1. Corners (x axis along (cos a, -sin a), y axis along (sin a, cos a))\n");
  Point ca[4], cb[4];
  const double area_a = corners_of("a", a, ca), area_b = corners_of("b", b, cb);

  std::printf("\n2. Clipping a by the 4 edges of b (inside = left of the directed edge, d >= 0; points are listed in\n"
              "   the order the pass emits them, so a crossing comes before the vertex it leads to)\n");
  Point poly[rbm::kMaxClipVertices];
  int n = 4;
  for (int k = 0; k < 4; ++k) poly[k] = ca[k];
  for (int e = 0; e < 4; ++e) {
    const Point p = cb[e], q = cb[(e + 1) % 4];
    const double length = std::hypot(q.x - p.x, q.y - p.y);  // d / length is the true signed distance
    std::printf("  edge p%d -> p%d of b, (%.6f, %.6f) -> (%.6f, %.6f), length %.6f; d(v) = cross(q - p, v - p)\n",
                e, (e + 1) % 4, p.x, p.y, q.x, q.y, length);
    // The walk of clip_by_half_plane, with the same helpers so every d and t is the kernel's to the bit.
    const auto d_of = [&](Point v) { return rbm::cross(rbm::sub_rn(q.x, p.x), rbm::sub_rn(q.y, p.y),
                                                       rbm::sub_rn(v.x, p.x), rbm::sub_rn(v.y, p.y)); };
    Point walked[rbm::kMaxClipVertices];
    int m = 0;
    for (int k = 0; k < n; ++k) {
      const int j = (k + n - 1) % n;  // the edge prev -> cur closes the polygon at k = 0
      const double d_prev = d_of(poly[j]), d_cur = d_of(poly[k]);
      if ((d_prev > 0 && d_cur < 0) || (d_prev < 0 && d_cur > 0)) {
        const double t = rbm::div_rn(d_prev, rbm::sub_rn(d_prev, d_cur));
        walked[m++] = {rbm::add_rn(poly[j].x, rbm::mul_rn(t, rbm::sub_rn(poly[k].x, poly[j].x))),
                       rbm::add_rn(poly[j].y, rbm::mul_rn(t, rbm::sub_rn(poly[k].y, poly[j].y)))};
        std::printf("      v%d -> v%d crosses: t = d_prev / (d_prev - d_cur) = %.6f / %.6f = %.6f"
                    " -> add (%.6f, %.6f)\n", j, k, d_prev, d_prev - d_cur, t, walked[m - 1].x, walked[m - 1].y);
      }
      // d = 0 counts as inside: a vertex on the line is kept and makes no crossing (touching stays exact).
      std::printf("    v%d (%.6f, %.6f)  d = %+10.6f (distance %+.6f)  %s\n", k, poly[k].x, poly[k].y, d_cur + 0.0,
                  d_cur / length + 0.0,  // + 0.0: -0 prints as 0
                  d_cur >= 0 ? (d_cur == 0 ? "kept (on the line)" : "kept") : "dropped");
      if (d_cur >= 0) walked[m++] = poly[k];
    }
    // The shared pass itself must give the same polygon; the walk above only narrates it.
    Point clipped[rbm::kMaxClipVertices];
    n = rbm::clip_by_half_plane(poly, n, p, q, clipped);
    bool same = n == m;
    for (int k = 0; same && k < n; ++k) same = clipped[k].x == walked[k].x && clipped[k].y == walked[k].y;
    std::printf("  after edge %d (%d vertices%s): ", e, n, same ? "" : "; clip_by_half_plane DIFFERS from the walk");
    print_polygon(clipped, n);
    for (int k = 0; k < n; ++k) poly[k] = clipped[k];
  }

  std::printf("\n3. Areas and IoU\n");
  std::printf("  intersection polygon (%d vertices): ", n);
  print_polygon(poly, n);
  double inter = rbm::polygon_area(poly, n);
  // The op's one tolerance: an intersection below 16 eps (A_a + A_b) is the sliver rounding leaves on a
  // shared edge, and counts as empty, so touching boxes give exactly 0.
  const double noise_floor = rbm::kEmptyFloor * std::numeric_limits<double>::epsilon() * (area_a + area_b);
  std::printf("  I = shoelace area = %.12g", inter);
  if (!(inter > noise_floor)) std::printf("  (not above the floor 16 eps (A_a + A_b) = %.3g: empty)", noise_floor);
  std::printf("\n");
  double iou = 0;
  if (!(area_a > 0) || !(area_b > 0)) {
    std::printf("  a zero-area box: IoU is 0 (never 0/0)\n");
  } else {
    if (!(inter > noise_floor)) inter = 0;
    inter = std::min(inter, std::min(area_a, area_b));  // rounding may overshoot an area by an ulp
    const double uni = area_a + area_b - inter;
    iou = inter > 0 ? inter / uni : 0.0;
    std::printf("  A_a = %.6f,  A_b = %.6f,  U = A_a + A_b - I = %.6f,  IoU = I / U = %.12f\n", area_a, area_b, uni,
                iou);
  }

  // The op works about a's centre (box_iou_rotated.h, "Precision"); the walk used absolute coordinates,
  // so the two can differ by rounding only.
  const double op = op_iou(a, b);
  std::printf("  minidet::box_iou_rotated: %.12f -> ", op);
  if (op == iou) std::printf("the same\n");
  else std::printf("differs by %.3g (the op computes about a's centre, the walk in absolute coordinates)\n", op - iou);
  if (cuda::is_available()) {
    const Tensor gpu = box_iou_rotated(from_vector<double>(a, {1, 5}).cuda(), from_vector<double>(b, {1, 5}).cuda());
    std::printf("  on CUDA: %.12f (sin and cos may differ in the last bit)\n", gpu.cpu().item<double>());
  }
  std::vector<double> b_pi = b;
  b_pi[4] += M_PI;  // the same box: its corners are listed from p2 instead of p0, the polygon is the same
  const double turned = op_iou(a, b_pi);
  std::printf("  b turned by pi (angle %g): IoU %.12f, %s", b_pi[4], turned, turned == op ? "the same\n" : "");
  if (turned != op) std::printf("differs by %.3g (the rounding of sin and cos)\n", turned - op);
  return std::fabs(op - iou) <= 1e-12 && std::fabs(turned - op) <= 1e-12 ? 0 : 1;
}
