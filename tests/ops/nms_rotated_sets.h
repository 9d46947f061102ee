// What the rotated NMS test files share (test_nms_rotated.cpp, test_nms_rotated_mask.cpp): random rotated box
// sets, the greedy definition by brute force, and the filter that keeps a set away from the threshold so that
// CPU and CUDA must agree.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"
#include "ops/nms_rotated/nms_rotated_kernels.h"
#include "tests/support.h"

namespace minidet::test {

using Longs = std::vector<int64_t>;
constexpr double kPi = 3.14159265358979323846;
inline const double kNaN = std::numeric_limits<double>::quiet_NaN();
inline const double kInf = std::numeric_limits<double>::infinity();

inline Longs kept(const Tensor& t) {
  CHECK(t.dtype() == kInt64);
  CHECK(t.dim() == 1);
  return t.cpu().to_vector<int64_t>();
}

inline Tensor boxes_of(const std::vector<double>& rows, DType dtype = kFloat32) {
  return from_vector<double>(rows, {static_cast<int64_t>(rows.size() / 5), 5}).to(dtype);
}
inline Tensor scores_of(const std::vector<double>& s, DType dtype = kFloat32) {
  return from_vector<double>(s).to(dtype);
}
inline Tensor ids_of(const Longs& ids) { return from_vector<int64_t>(ids); }

struct BoxSet {
  Tensor boxes, scores, classes;  // float64 boxes and scores; convert with .to(dtype)
};

// n random rotated boxes: centres uniform in [0, extent)^2, w and h in [8, 8 + extent / 4), angles uniform in
// [-pi, pi) (any finite angle is allowed); a small extent packs them so that many pairs overlap. With
// `duplicates` the rows are drawn from n / 4 + 1 distinct boxes (IoU exactly 1), a third of the copies turned
// by + or - pi (the same box). `tied_scores`: 5 score values only. Classes in [0, classes), mapped to -3c - 5
// and the boxes moved by -400 with `negative`.
inline BoxSet random_set(int64_t n, double extent, bool duplicates, bool tied_scores, uint64_t seed,
                         int64_t classes = 1, bool negative = false) {
  Generator g(seed);
  const int64_t distinct = duplicates ? n / 4 + 1 : n;
  const double shift = negative ? -400 : 0;
  std::vector<double> pool(5 * distinct);
  for (int64_t i = 0; i < distinct; ++i) {
    pool[5 * i + 0] = shift + g.next_uniform() * extent;
    pool[5 * i + 1] = shift + g.next_uniform() * extent;
    pool[5 * i + 2] = 8 + g.next_uniform() * extent / 4;
    pool[5 * i + 3] = 8 + g.next_uniform() * extent / 4;
    pool[5 * i + 4] = (2 * g.next_uniform() - 1) * kPi;
  }
  std::vector<double> rows(5 * n), scores(n);
  Longs ids(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t source = duplicates ? g.next_int(0, distinct) : i;
    for (int c = 0; c < 5; ++c) rows[5 * i + c] = pool[5 * source + c];
    if (duplicates) rows[5 * i + 4] += static_cast<double>(g.next_int(-1, 2)) * kPi;
    scores[i] = tied_scores ? static_cast<double>(g.next_int(0, 5)) / 4 : g.next_uniform();
    ids[i] = g.next_int(0, classes);
    if (negative) ids[i] = -3 * ids[i] - 5;
  }
  return {boxes_of(rows, kFloat64), scores_of(scores, kFloat64), ids_of(ids)};
}

// The definition, by brute force: box_iou_rotated's matrix (row = the better box, as nms_rotated asks), the
// stable descending score order, and the greedy rule "keep b unless a kept box of b's class has IoU > t",
// compared in the boxes' dtype.
inline Longs reference_keep(const Tensor& boxes, const Tensor& scores, const Tensor& classes, double threshold) {
  const int64_t n = boxes.size(0);
  const std::vector<double> iou = box_iou_rotated(boxes, boxes).to(kFloat64).to_vector<double>();
  const std::vector<double> score = scores.to(kFloat64).to_vector<double>();
  const Longs ids = classes.defined() ? classes.to_vector<int64_t>() : Longs(static_cast<size_t>(n), 0);
  const double t = boxes.dtype() == kFloat32 ? static_cast<double>(static_cast<float>(threshold)) : threshold;
  Longs order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)]; });
  Longs keep;
  for (int64_t b : order) {
    bool suppressed = false;
    for (int64_t k : keep)
      suppressed = suppressed || (ids[static_cast<size_t>(k)] == ids[static_cast<size_t>(b)] &&
                                  iou[static_cast<size_t>(k * n + b)] > t);
    if (!suppressed) keep.push_back(b);
  }
  return keep;
}

// The rows of `set` left after dropping every box that has a pair IoU within `margin` of `threshold` (IoU in
// `dtype`, by nms_rotated's own pair test): a set on which the CPU and CUDA must keep the same boxes, whatever
// the last bit of sin and cos (nms_rotated.h). Pairs whose bounds do not meet (IoU exactly 0) never count.
template <typename T>
BoxSet away_from_threshold(const BoxSet& set, double threshold, double margin) {
  const int64_t n = set.boxes.size(0);
  const std::vector<T> values = set.boxes.to(DTypeOf<T>::value).template to_vector<T>();
  std::vector<ops::detail::RotatedNmsBox<T>> prepared;
  for (int64_t i = 0; i < n; ++i) prepared.push_back(ops::detail::prepare_rotated_box(&values[5 * i]));
  std::vector<bool> drop(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const double iou = static_cast<double>(ops::detail::rotated_nms_iou(prepared[i], prepared[j]));
      if (iou > 0 && std::fabs(iou - threshold) < margin) drop[static_cast<size_t>(std::max(i, j))] = true;
    }
  Longs rows;
  for (int64_t i = 0; i < n; ++i)
    if (!drop[static_cast<size_t>(i)]) rows.push_back(i);
  auto take = [&](const Tensor& t) {
    std::vector<double> out;
    const int64_t width = t.dim() == 2 ? t.size(1) : 1;
    const std::vector<double> all = t.to(kFloat64).to_vector<double>();
    for (int64_t r : rows)
      for (int64_t c = 0; c < width; ++c) out.push_back(all[static_cast<size_t>(r * width + c)]);
    return t.dim() == 2 ? from_vector<double>(out, {static_cast<int64_t>(rows.size()), width})
                        : from_vector<double>(out);
  };
  Longs ids;
  const Longs all_ids = set.classes.to_vector<int64_t>();
  for (int64_t r : rows) ids.push_back(all_ids[static_cast<size_t>(r)]);
  return {take(set.boxes), take(set.scores), ids_of(ids)};
}

}  // namespace minidet::test
