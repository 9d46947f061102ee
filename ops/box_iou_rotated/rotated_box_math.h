// Rotated-box geometry shared by every CPU and CUDA kernel that measures rotated boxes (box_iou_rotated
// today, nms_rotated next): the corners of a box, the convex polygon clip, the shoelace area and the IoU.
// Header-only, callable from host and device code, no heap: every polygon lives in a fixed-size array.
//
// The convention, the clipping method and the edge-case policy are explained in
// ops/box_iou_rotated/box_iou_rotated.h; this file states only what each function computes.
//
// Every product, sum and quotient below goes through box_math's exactly rounded helpers (mul_rn, add_rn,
// ...; ops/boxes/box_math.h says why), for two reasons:
//   - a cross product x1*y2 - y1*x2 with the two products rounded the same way is exactly 0 for parallel
//     vectors (in particular for an edge and itself). An FMA would keep one product unrounded and leave a
//     tiny non-zero residue; with the helpers, identical boxes clip to exactly their own corners and give
//     IoU exactly 1 (box_iou_rotated.h, "identical boxes");
//   - the arithmetic is the same sequence of IEEE-754 operations on the host and the GPU. Only std::sin and
//     std::cos differ (glibc and CUDA's libdevice may round the last bit differently), so CPU and CUDA agree
//     to a few ulps of the corners, not necessarily to the bit.
#pragma once

#include <cmath>
#include <limits>

#include "core/macros.h"
#include "ops/boxes/box_math.h"

namespace minidet::rotated_box_math {

using box_math::add_rn;
using box_math::div_rn;
using box_math::max_of;
using box_math::min_of;
using box_math::mul_rn;
using box_math::sub_rn;

// pi to double precision (C++17 has no std::numbers::pi).
inline constexpr double kPi = 3.14159265358979323846;

template <typename T>
struct Point {
  T x, y;
};

// ---- the angle range --------------------------------------------------------------------------------

// The one normalisation of a rotated box's angle into [-pi/2, pi/2): a - pi floor((a + pi/2) / pi). A box
// turned by pi is the same box, so every box has exactly one angle in the range (docs/rotated.md). The
// tensor form, models::normalize_angle (models/box_coder/rotated_box_coder.h), does the same operations in
// the same order; this scalar form serves data/ (flips, files) and the host code of the ops.
template <typename T>
MINIDET_HOST_DEVICE inline T normalize_angle(T a) {
  const T pi = T(kPi);
  return sub_rn(a, mul_rn(std::floor(div_rn(add_rn(a, pi / T(2)), pi)), pi));
}

// Capacity of a clipped polygon. Exactly, a convex quadrilateral clipped by the 4 half-planes of another
// has at most 8 vertices (each half-plane adds at most one). In floating point a near-degenerate polygon can
// cross a clip line more than twice (rounding wiggles vertices that lie on the line), and one pass then
// emits at most 1.5 times its input (the vertices kept plus one point per strict sign change, see
// clip_by_half_plane): 4 -> 6 -> 9 -> 13 -> 19. So 20 slots can never overflow, and no vertex is ever
// dropped, whatever rounding does.
constexpr int kMaxClipVertices = 20;

// ---- small vector helpers -----------------------------------------------------------------------------

// The z component of (ax, ay, 0) x (bx, by, 0): > 0 when b is counter-clockwise from a in a y-up frame.
template <typename T>
MINIDET_HOST_DEVICE inline T cross(T ax, T ay, T bx, T by) {
  return sub_rn(mul_rn(ax, by), mul_rn(ay, bx));
}

// NaN and +-Inf fail: x - x is 0 for every finite x and NaN otherwise (no isfinite, which some device
// headers spell differently).
template <typename T>
MINIDET_HOST_DEVICE inline bool rotated_box_is_finite(const T* box) {
  bool finite = true;
  for (int k = 0; k < 5; ++k) finite = finite && (box[k] - box[k] == T(0));
  return finite;
}

// ---- the box -----------------------------------------------------------------------------------------

// The corners of box (cx, cy, w, h, angle), with the centre given separately so the caller can shift it to
// a local origin. The box's x axis is (cos a, -sin a) and its y axis (sin a, cos a) (box_iou_rotated.h):
//   half_u = (|w|/2)(cos a, -sin a),  half_v = (|h|/2)(sin a, cos a)
//   p0 = c - half_u - half_v,  p1 = c + half_u - half_v,  p2 = c + half_u + half_v,  p3 = c - half_u + half_v
// in that order the signed (shoelace) area is +|w||h| > 0: the interior is on the left of every edge
// p_k -> p_k+1 (cross(edge, point - p_k) >= 0), which clip_by_half_plane relies on. |w| and |h|: the corner
// formula is symmetric in the signs of w and h (a negative w lists the same 4 points), and the absolute
// values keep the order positive. p2 - c is computed as exactly -(p0 - c), p3 - c as -(p1 - c).
template <typename T>
MINIDET_HOST_DEVICE inline void box_corners(T center_x, T center_y, T width, T height, T angle, Point<T>* corners) {
  const T cos_a = std::cos(angle), sin_a = std::sin(angle);
  const T half_w = std::fabs(width) * T(0.5), half_h = std::fabs(height) * T(0.5);
  const T ux = mul_rn(half_w, cos_a), uy = -mul_rn(half_w, sin_a);  // half_u
  const T vx = mul_rn(half_h, sin_a), vy = mul_rn(half_h, cos_a);   // half_v
  const T diag_x = add_rn(ux, vx), diag_y = add_rn(uy, vy);         // half_u + half_v: p2 - c
  const T anti_x = sub_rn(ux, vx), anti_y = sub_rn(uy, vy);         // half_u - half_v: p1 - c
  corners[0] = {sub_rn(center_x, diag_x), sub_rn(center_y, diag_y)};
  corners[1] = {add_rn(center_x, anti_x), add_rn(center_y, anti_y)};
  corners[2] = {add_rn(center_x, diag_x), add_rn(center_y, diag_y)};
  corners[3] = {sub_rn(center_x, anti_x), sub_rn(center_y, anti_y)};
}

// ---- polygons ----------------------------------------------------------------------------------------

// The signed area of polygon v[0..n) by the shoelace formula, written as a fan of triangles from v[0]:
//   area = 1/2 sum_{k=1}^{n-2} cross(v[k] - v[0], v[k+1] - v[0])
// which is the shoelace sum with v[0] moved to the origin: the same value exactly, but the products are of
// the polygon's own size rather than of its distance from the origin, so there is less cancellation.
// Positive for the corner order above; 0 for n < 3.
template <typename T>
MINIDET_HOST_DEVICE inline T polygon_area(const Point<T>* v, int n) {
  T twice = T(0);
  for (int k = 1; k + 1 < n; ++k)
    twice = add_rn(twice, cross(sub_rn(v[k].x, v[0].x), sub_rn(v[k].y, v[0].y), sub_rn(v[k + 1].x, v[0].x),
                                sub_rn(v[k + 1].y, v[0].y)));
  return mul_rn(twice, T(0.5));
}

// One Sutherland-Hodgman pass (Sutherland & Hodgman 1974): the part of polygon in[0..n) on the inside of
// the directed line p -> q, where inside means d(v) = cross(q - p, v - p) >= 0 (the closed left half-plane).
// Walking the edges prev -> cur of the polygon:
//   - when d(prev) and d(cur) have strictly opposite signs the edge crosses the line: emit the crossing
//       prev + t (cur - prev),   t = d(prev) / (d(prev) - d(cur))
//     The two distances have opposite signs, so the denominator is a sum of magnitudes: no cancellation, no
//     division by a tiny number, and t stays in [0, 1] after rounding, even for nearly parallel edges (the
//     weak spot of a line-line intersection through a 2x2 determinant);
//   - then emit cur if it is inside.
// A vertex exactly on the line (d = 0) is inside and makes no crossing, so touching polygons produce
// repeated or collinear vertices, which add nothing to the area, rather than spurious ones.
// Writes at most n + (number of strict sign changes) <= 1.5 n points to out; returns how many.
template <typename T>
MINIDET_HOST_DEVICE inline int clip_by_half_plane(const Point<T>* in, int n, Point<T> p, Point<T> q, Point<T>* out) {
  if (n == 0) return 0;
  const T edge_x = sub_rn(q.x, p.x), edge_y = sub_rn(q.y, p.y);
  Point<T> prev = in[n - 1];
  T d_prev = cross(edge_x, edge_y, sub_rn(prev.x, p.x), sub_rn(prev.y, p.y));
  int count = 0;
  for (int k = 0; k < n; ++k) {
    const Point<T> cur = in[k];
    const T d_cur = cross(edge_x, edge_y, sub_rn(cur.x, p.x), sub_rn(cur.y, p.y));
    if ((d_prev > T(0) && d_cur < T(0)) || (d_prev < T(0) && d_cur > T(0))) {
      const T t = div_rn(d_prev, sub_rn(d_prev, d_cur));
      out[count++] = {add_rn(prev.x, mul_rn(t, sub_rn(cur.x, prev.x))),
                      add_rn(prev.y, mul_rn(t, sub_rn(cur.y, prev.y)))};
    }
    if (d_cur >= T(0)) out[count++] = cur;
    prev = cur;
    d_prev = d_cur;
  }
  return count;
}

// The intersection of two positively ordered convex quadrilaterals (box_corners), as a polygon: subject a is
// clipped by the 4 edges of b in turn. out must hold kMaxClipVertices points; returns the vertex count
// (0 when they do not meet; fewer than 3, or collinear points, when they only touch).
template <typename T>
MINIDET_HOST_DEVICE inline int intersect_quads(const Point<T>* a, const Point<T>* b, Point<T>* out) {
  Point<T> scratch[kMaxClipVertices];
  // Passes alternate between out and scratch so that the fourth one lands in out.
  int count = clip_by_half_plane(a, 4, b[0], b[1], out);
  count = clip_by_half_plane(out, count, b[1], b[2], scratch);
  count = clip_by_half_plane(scratch, count, b[2], b[3], out);
  count = clip_by_half_plane(out, count, b[3], b[0], scratch);
  for (int k = 0; k < count; ++k) out[k] = scratch[k];
  return count;
}

// ---- IoU ---------------------------------------------------------------------------------------------

// Intersections smaller than kEmptyFloor * epsilon * (area_a + area_b) are rounding noise and count as
// empty (box_iou_rotated.h, "epsilon policy").
constexpr int kEmptyFloor = 16;

// Whether the axis-aligned bounds of two corner sets overlap or touch: when they do not, the quadrilaterals
// are disjoint (exactly: comparisons do not round), and the clip can be skipped.
template <typename T>
MINIDET_HOST_DEVICE inline bool bounds_meet(const Point<T>* a, const Point<T>* b) {
  T a_lo_x = a[0].x, a_hi_x = a[0].x, a_lo_y = a[0].y, a_hi_y = a[0].y;
  T b_lo_x = b[0].x, b_hi_x = b[0].x, b_lo_y = b[0].y, b_hi_y = b[0].y;
  for (int k = 1; k < 4; ++k) {
    a_lo_x = min_of(a_lo_x, a[k].x), a_hi_x = max_of(a_hi_x, a[k].x);
    a_lo_y = min_of(a_lo_y, a[k].y), a_hi_y = max_of(a_hi_y, a[k].y);
    b_lo_x = min_of(b_lo_x, b[k].x), b_hi_x = max_of(b_hi_x, b[k].x);
    b_lo_y = min_of(b_lo_y, b[k].y), b_hi_y = max_of(b_hi_y, b[k].y);
  }
  return a_lo_x <= b_hi_x && b_lo_x <= a_hi_x && a_lo_y <= b_hi_y && b_lo_y <= a_hi_y;
}

// IoU of rotated boxes a and b, each 5 contiguous values (cx, cy, w, h, angle):
//   - NaN when a value of either box is NaN or +-Inf;
//   - 0 when either box has zero area (w = 0 or h = 0), or the boxes are disjoint, touch, or overlap by
//     less than the rounding floor;
//   - otherwise I / (A_a + A_b - I) in [0, 1], computed about a's centre (the local origin).
template <typename T>
MINIDET_HOST_DEVICE inline T rotated_box_iou(const T* a, const T* b) {
  if (!rotated_box_is_finite(a) || !rotated_box_is_finite(b)) return std::numeric_limits<T>::quiet_NaN();
  // The local origin: centres near 1e4 keep float32's resolution for the box sizes. The difference of two
  // centres within a factor of 2 of each other (overlapping boxes far from 0) is exact (Sterbenz's lemma),
  // so there the geometry depends only on where b sits relative to a.
  Point<T> corners_a[4], corners_b[4];
  box_corners(T(0), T(0), a[2], a[3], a[4], corners_a);
  box_corners(sub_rn(b[0], a[0]), sub_rn(b[1], a[1]), b[2], b[3], b[4], corners_b);
  // The areas come from the same corners and the same shoelace as the intersection, so a box inside the
  // other, or two identical boxes, clip to exactly the inner box's corners and I equals its area exactly.
  const T area_a = polygon_area(corners_a, 4), area_b = polygon_area(corners_b, 4);
  if (!(area_a > T(0)) || !(area_b > T(0))) return T(0);  // zero-area box: IoU 0, not 0/0
  if (!bounds_meet(corners_a, corners_b)) return T(0);
  Point<T> overlap[kMaxClipVertices];
  const int count = intersect_quads(corners_a, corners_b, overlap);
  T inter = polygon_area(overlap, count);
  const T floor = mul_rn(T(kEmptyFloor) * std::numeric_limits<T>::epsilon(), add_rn(area_a, area_b));
  if (!(inter > floor)) return T(0);
  // Exactly, I <= min(A_a, A_b); rounding may overshoot by an ulp, and the clamp keeps IoU <= 1.
  inter = min_of(inter, min_of(area_a, area_b));
  return div_rn(inter, sub_rn(add_rn(area_a, area_b), inter));
}

}  // namespace minidet::rotated_box_math
