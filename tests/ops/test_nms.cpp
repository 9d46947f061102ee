// nms and batched_nms: hand-checked cases, CUDA equal to the CPU box for box, errors.
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "core/factories.h"
#include "core/transfer_counts.h"
#include "ops/boxes/box_math.h"
#include "ops/nms/nms.h"
#include "ops/nms/nms_mask.h"
#include "ops/elementwise/compare.h"
#include "ops/indexing/index_select.h"
#include "ops/indexing/where.h"
#include "tests/support.h"

using namespace minidet;

namespace {

using Longs = std::vector<int64_t>;

Longs kept(const Tensor& t) {
  CHECK(t.dtype() == kInt64);
  CHECK(t.dim() == 1);
  return t.cpu().to_vector<int64_t>();
}

Tensor boxes_of(const std::vector<double>& xyxy, DType dtype = kFloat32) {
  return from_vector<double>(xyxy, {static_cast<int64_t>(xyxy.size() / 4), 4}).to(dtype);
}
Tensor scores_of(const std::vector<double>& s, DType dtype = kFloat32) { return from_vector<double>(s).to(dtype); }

// n random boxes: corners uniform in [0, extent), sizes in [8, 8 + extent / 4); a small extent packs them
// tightly so that many pairs overlap. With `duplicates`, the boxes are drawn from only n / 4 + 1 distinct
// ones, so many pairs are identical (IoU 1). Scores with `tied_scores` take 5 values only.
struct BoxSet {
  Tensor boxes, scores, classes;
};
// `negative` moves every box by -400 and maps class c to -3c - 5.
BoxSet random_set(int64_t n, double extent, bool duplicates, bool tied_scores, uint64_t seed, int64_t classes = 1,
                  bool negative = false) {
  Generator g(seed);
  const int64_t distinct = duplicates ? n / 4 + 1 : n;
  std::vector<double> pool(4 * distinct);
  for (int64_t i = 0; i < distinct; ++i) {
    const double shift = negative ? -400 : 0;
    const double x = shift + g.next_uniform() * extent, y = shift + g.next_uniform() * extent;
    pool[4 * i + 0] = x;
    pool[4 * i + 1] = y;
    pool[4 * i + 2] = x + 8 + g.next_uniform() * extent / 4;
    pool[4 * i + 3] = y + 8 + g.next_uniform() * extent / 4;
  }
  std::vector<double> xyxy(4 * n), scores(n);
  std::vector<int64_t> class_ids(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t source = duplicates ? g.next_int(0, distinct) : i;
    for (int c = 0; c < 4; ++c) xyxy[4 * i + c] = pool[4 * source + c];
    scores[i] = tied_scores ? static_cast<double>(g.next_int(0, 5)) / 4 : g.next_uniform();
    class_ids[i] = g.next_int(0, classes);
    if (negative) class_ids[i] = -3 * class_ids[i] - 5;
  }
  return {boxes_of(xyxy), scores_of(scores), from_vector(class_ids)};
}

// The rows a keep mask marks, in index order (batched_nms's result sorted).
Longs marked(const Tensor& mask) {
  CHECK(mask.dtype() == kBool);
  const std::vector<bool> bits = [&] {
    const std::vector<uint8_t> raw = mask.cpu().to(kUInt8).to_vector<uint8_t>();
    return std::vector<bool>(raw.begin(), raw.end());
  }();
  Longs rows;
  for (size_t i = 0; i < bits.size(); ++i)
    if (bits[i]) rows.push_back(static_cast<int64_t>(i));
  return rows;
}
Longs sorted(Longs v) {
  std::sort(v.begin(), v.end());
  return v;
}

// nms.h's definition, written out pair by pair in T: boxes in descending score order (ties in input order), each
// kept unless a kept box of its class has IoU > threshold with it, the IoU in T as inter / (area_a + area_b -
// inter) with widths high - low + offset clamped at 0 (0 when the boxes do not overlap).
template <typename T>
Longs reference_keep(const BoxSet& set, double threshold, int offset, bool by_class) {
  const std::vector<T> b = set.boxes.to(DTypeOf<T>::value).template to_vector<T>();
  const std::vector<T> s = set.scores.to(DTypeOf<T>::value).template to_vector<T>();
  const std::vector<int64_t> ids = set.classes.to_vector<int64_t>();
  const size_t n = s.size();
  Longs order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
  // Products through mul_rn, so that no compiler fuses one into the sum that follows (as the library does).
  const auto extent = [&](T low, T high) { return std::max(high - low + T(offset), T(0)); };
  const auto iou = [&](int64_t x, int64_t y) {
    const T* p = &b[4 * x];
    const T* q = &b[4 * y];
    const T inter = box_math::mul_rn(extent(std::max(p[0], q[0]), std::min(p[2], q[2])),
                                     extent(std::max(p[1], q[1]), std::min(p[3], q[3])));
    if (!(inter > T(0))) return T(0);
    const T area_p = box_math::mul_rn(extent(p[0], p[2]), extent(p[1], p[3]));
    const T area_q = box_math::mul_rn(extent(q[0], q[2]), extent(q[1], q[3]));
    return inter / (area_p + area_q - inter);
  };
  Longs keep;
  for (int64_t i : order) {
    bool suppressed = false;
    for (int64_t k : keep)
      if ((!by_class || ids[k] == ids[i]) && iou(k, i) > static_cast<T>(threshold)) suppressed = true;
    if (!suppressed) keep.push_back(i);
  }
  return keep;
}

// The set with some boxes made empty or inverted: zero width (x2 = x1), inverted by 2 in x, inverted by 1 in y
// (an empty box again with offset 1). Their IoU with anything is 0, or 0 / 0 for two empty ones: never
// suppressed, never suppressing.
BoxSet with_degenerate_boxes(const BoxSet& set) {
  std::vector<double> xyxy = set.boxes.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < xyxy.size() / 4; ++i) {
    double* box = &xyxy[4 * i];
    if (i % 9 == 0) box[2] = box[0];
    if (i % 13 == 0) box[2] = box[0] - 2;
    if (i % 17 == 0) box[3] = box[1] - 1;
  }
  return {boxes_of(xyxy), set.scores, set.classes};
}

}  // namespace

// ---- values ---------------------------------------------------------------------------------------------------

TEST_CASE("values/nms: four boxes by hand") {
  // In score order 1 (0.9), 2 (0.7), 0 (0.6), 3 (0.2). IoU(1, 2) = 24 / 41 > 0.3: 2 goes. IoU(1, 0) = 2 / 36
  // and IoU(1, 3) = 6 / 60, IoU(0, 3) = 6 / 38: 0 and 3 stay.
  const Tensor boxes = boxes_of({6, 3, 8, 7, 3, 6, 9, 11, 3, 7, 10, 12, 1, 4, 13, 7});
  const Tensor scores = scores_of({0.6, 0.9, 0.7, 0.2});
  CHECK(kept(nms(boxes, scores, 0.3)) == Longs{1, 0, 3});
  CHECK(kept(nms(boxes.to(kFloat64), scores.to(kFloat64), 0.3)) == Longs{1, 0, 3});
  // Above IoU(1, 2) = 0.585 nothing is suppressed: all four, best first.
  CHECK(kept(nms(boxes, scores, 0.6)) == Longs{1, 2, 0, 3});
}

TEST_CASE("values/nms: equal scores keep input order") {
  // Three identical boxes with one score: the first in input order survives.
  const Tensor same = boxes_of({0, 0, 10, 10, 0, 0, 10, 10, 0, 0, 10, 10});
  CHECK(kept(nms(same, scores_of({0.5, 0.5, 0.5}), 0.5)) == Longs{0});
  // Disjoint boxes, tied scores: all kept, in input order among the ties.
  const Tensor apart = boxes_of({0, 0, 1, 1, 5, 5, 6, 6, 10, 10, 11, 11, 20, 20, 21, 21});
  CHECK(kept(nms(apart, scores_of({0.2, 0.7, 0.2, 0.7}), 0.5)) == Longs{1, 3, 0, 2});
}

TEST_CASE("values/nms: IoU equal to the threshold keeps both boxes") {
  // Areas 3 and 3, intersection 2, union 4: IoU exactly 0.5 (representable, so computed exactly).
  const Tensor boxes = boxes_of({0, 0, 3, 1, 1, 0, 4, 1});
  for (DType dtype : {kFloat32, kFloat64}) {
    CHECK(kept(nms(boxes.to(dtype), scores_of({0.9, 0.8}, dtype), 0.5)) == Longs{0, 1});
    CHECK(kept(nms(boxes.to(dtype), scores_of({0.9, 0.8}, dtype), 0.49)) == Longs{0});
  }
}

TEST_CASE("values/nms: offset 1 uses the legacy plus one widths") {
  // Touching boxes: with offset 0 they share no area; with offset 1 each is 2 x 2 pixels and they share a
  // 1 x 2 column: IoU = 2 / 6.
  const Tensor boxes = boxes_of({0, 0, 1, 1, 1, 0, 2, 1});
  const Tensor scores = scores_of({0.4, 0.8});
  CHECK(kept(nms(boxes, scores, 0.3)) == Longs{1, 0});
  CHECK(kept(nms(boxes, scores, 0.3, 1)) == Longs{1});
  CHECK(kept(nms(boxes, scores, 0.34, 1)) == Longs{1, 0});
}

TEST_CASE("values/nms: zero-area boxes empty and single inputs") {
  // A degenerate box (zero width) and an inverted one have IoU 0 with everything, themselves included.
  const Tensor boxes = boxes_of({2, 2, 2, 5, 2, 2, 2, 5, 4, 4, 3, 6, 4, 4, 3, 6});
  CHECK(kept(nms(boxes, scores_of({0.1, 0.2, 0.3, 0.4}), 0.0)) == Longs{3, 2, 1, 0});
  const Tensor none = nms(zeros({0, 4}), zeros({0}), 0.5);
  CHECK(none.sizes() == Shape{0});
  CHECK(none.dtype() == kInt64);
  CHECK(kept(nms(boxes_of({1, 1, 2, 2}), scores_of({0.3}), 0.5)) == Longs{0});
  CHECK(batched_nms(zeros({0, 4}), zeros({0}), zeros({0}, kInt64), 0.5).sizes() == Shape{0});
}

TEST_CASE("values/nms: non-contiguous boxes and scores") {
  const Tensor columns = boxes_of({6, 3, 8, 7, 3, 6, 9, 11, 3, 7, 10, 12, 1, 4, 13, 7}).t().contiguous();
  const Tensor boxes = columns.t();  // (4, 4) with strides (1, 4)
  REQUIRE_FALSE(boxes.is_contiguous());
  const Tensor scores = scores_of({0.6, 0, 0.9, 0, 0.7, 0, 0.2, 0}).slice(0, 0, 8, 2);
  CHECK(kept(nms(boxes, scores, 0.3)) == Longs{1, 0, 3});
}

TEST_CASE("values/batched_nms: classes never suppress each other even with negative coordinates") {
  // Box 0 (class 0) and box 1 (class 1) are identical: both stay. Box 2 repeats box 0 in class 0: it goes.
  const Tensor boxes = boxes_of({-100, -100, -50, -50, -100, -100, -50, -50, -100, -100, -50, -50});
  CHECK(kept(batched_nms(boxes, scores_of({0.5, 0.9, 0.4}), from_vector<int64_t>({0, 1, 0}), 0.5)) == Longs{1, 0});
  // Where the usual offset trick fails: the largest coordinate is -5, so it would move class 1 by
  // 1 * (-5 + 1) = -4, right onto the class 0 box. Per-class NMS keeps both.
  const Tensor tricky = boxes_of({-14, -14, -9, -9, -10, -10, -5, -5});
  CHECK(kept(batched_nms(tricky, scores_of({0.9, 0.8}), from_vector<int64_t>({0, 1}), 0.5)) == Longs{0, 1});
  // Huge and negative class ids are just labels; output in descending score order across classes.
  const Tensor pairs = boxes_of({0, 0, 10, 10, 1, 1, 10, 10, 0, 0, 10, 10, 1, 0, 10, 10, 50, 50, 60, 60});
  const Tensor ids = from_vector<int64_t>({int64_t(1) << 60, int64_t(1) << 60, -7, -7, -7});
  CHECK(kept(batched_nms(pairs, scores_of({0.3, 0.9, 0.8, 0.1, 0.5}), ids, 0.5)) == Longs{1, 2, 4});
  // One class: the same as nms.
  const BoxSet set = random_set(300, 200, false, true, 11);
  CHECK(kept(batched_nms(set.boxes, set.scores, zeros({300}, kInt64), 0.5)) == kept(nms(set.boxes, set.scores, 0.5)));
}

TEST_CASE("values/nms: the greedy definition pair by pair for random sets") {
  // Spread-out and packed sets (many suppressions), with duplicate boxes (IoU 1), tied scores and empty or
  // inverted boxes (with_degenerate_boxes), every threshold from 0 (any overlap suppresses) to 1 (nothing
  // does), offsets 0 and 1, float32 and float64; with classes, 1 to 9 of them and more boxes than the count
  // above which the classes' passes run on several threads.
  for (int variant = 0; variant < 4; ++variant) {
    const int64_t classes = variant == 3 ? 9 : variant + 1, n = variant == 3 ? 1500 : 300;
    const BoxSet set = with_degenerate_boxes(
        random_set(n, variant == 0 ? 400 : 90, variant >= 2, variant == 1, 31 + variant, classes));
    for (DType dtype : {kFloat32, kFloat64}) {
      const Tensor boxes = set.boxes.to(dtype), scores = set.scores.to(dtype);
      for (double threshold : {0.0, 0.3, 0.5, 0.7, 1.0}) {
        for (int offset : {0, 1}) {
          CAPTURE(variant);
          CAPTURE(dtype);
          CAPTURE(threshold);
          CAPTURE(offset);
          const bool f32 = dtype == kFloat32;
          if (variant < 3) {
            CHECK(kept(nms(boxes, scores, threshold, offset)) ==
                  (f32 ? reference_keep<float>(set, threshold, offset, false)
                       : reference_keep<double>(set, threshold, offset, false)));
          }
          CHECK(kept(batched_nms(boxes, scores, set.classes, threshold, offset)) ==
                (f32 ? reference_keep<float>(set, threshold, offset, true)
                     : reference_keep<double>(set, threshold, offset, true)));
        }
      }
    }
  }
  // The packed sets really suppress: at 0.5 a good share of the boxes goes.
  const BoxSet packed = random_set(300, 90, false, false, 32);
  CHECK(kept(nms(packed.boxes, packed.scores, 0.5)).size() < 200);
}

TEST_CASE("values/batched_nms: the union of each class's own NMS in decreasing score order") {
  // The CPU runs one greedy pass per class and merges the kept boxes back into score order: the same as NMS
  // of each class alone, joined and ordered by score (stable: ties in input order), for tied scores and
  // duplicate boxes too.
  for (int64_t classes : {1, 2, 7}) {
    CAPTURE(classes);
    const BoxSet set = random_set(300, 80, true, true, 11 * classes, classes);
    const std::vector<int64_t> ids = set.classes.to_vector<int64_t>();
    const std::vector<double> score = set.scores.to(kFloat64).to_vector<double>();
    Longs expected;
    for (int64_t c = 0; c < classes; ++c) {
      Longs members;
      for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == c) members.push_back(static_cast<int64_t>(i));
      if (members.empty()) continue;
      const Tensor index = from_vector<int64_t>(members);
      for (int64_t local : kept(nms(index_select(set.boxes, 0, index), index_select(set.scores, 0, index), 0.5)))
        expected.push_back(members[static_cast<size_t>(local)]);
    }
    std::stable_sort(expected.begin(), expected.end(), [&](int64_t a, int64_t b) {
      return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)] ||
             (score[static_cast<size_t>(a)] == score[static_cast<size_t>(b)] && a < b);
    });
    CHECK(kept(batched_nms(set.boxes, set.scores, set.classes, 0.5)) == expected);
  }
}

TEST_CASE("values/batched_nms_mask: marks exactly batched_nms's rows and counts them") {
  for (int64_t n : {0, 1, 64, 200}) {
    const BoxSet set = random_set(n, 100, n == 200, true, 31 + n, 3);
    CAPTURE(n);
    const NmsMask m = batched_nms_mask(set.boxes, set.scores, set.classes, 0.5);
    const Longs expected = sorted(kept(batched_nms(set.boxes, set.scores, set.classes, 0.5)));
    CHECK(m.keep_mask.sizes() == Shape{n});
    CHECK(marked(m.keep_mask) == expected);
    CHECK(m.status.to_vector<int64_t>() == Longs{static_cast<int64_t>(expected.size()), 0});
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_CONTAINING(batched_nms_mask(boxes_of({0, 0, 1, nan}), scores_of({0.5}),
                                                        from_vector<int64_t>({0}), 0.5),
                          "batched_nms_mask: boxes contain nan at box 0");
  CHECK_THROWS_CONTAINING(check_nms_status("rpn", {3, kNmsBadScoreFlag}),
                          "rpn: scores contain NaN or Inf");
}

// ---- errors ---------------------------------------------------------------------------------------------------

TEST_CASE("errors/nms: shapes lengths dtypes values and arguments") {
  const Tensor boxes = boxes_of({0, 0, 1, 1, 2, 2, 3, 3}), scores = scores_of({0.5, 0.6});
  CHECK_THROWS_CONTAINING(nms(zeros({2, 5}), scores, 0.5), "nms: expected boxes of shape (N, 4), got (2, 5)");
  CHECK_THROWS_CONTAINING(nms(zeros({8}), scores, 0.5), "nms: expected boxes of shape (N, 4)");
  CHECK_THROWS_CONTAINING(nms(boxes, zeros({2, 1}), 0.5), "nms: expected scores of shape (N)");
  CHECK_THROWS_CONTAINING(nms(boxes, scores_of({0.5, 0.6, 0.7}), 0.5), "one score per box, got 2 boxes and 3");
  CHECK_THROWS_CONTAINING(nms(boxes.to(kInt64), scores, 0.5), "nms: expected boxes to be float32 or float64");
  CHECK_THROWS_CONTAINING(nms(boxes, scores.to(kFloat64), 0.5), "nms: expected boxes and scores of the same dtype");
  CHECK_THROWS_CONTAINING(nms(boxes, scores, -0.1), "nms: expected a finite iou_threshold >= 0, got -0.1");
  CHECK_THROWS_CONTAINING(nms(boxes, scores, std::numeric_limits<double>::quiet_NaN()), "iou_threshold");
  CHECK_THROWS_CONTAINING(nms(boxes, scores, 0.5, 2), "nms: expected offset 0 or 1");
  CHECK_THROWS_CONTAINING(nms(Tensor(), scores, 0.5), "nms: boxes is an undefined tensor");
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_CONTAINING(nms(boxes_of({0, 0, 1, 1, 2, nan, 3, 3}), scores, 0.5), "nms: boxes contain nan at box 1");
  CHECK_THROWS_CONTAINING(nms(boxes_of({0, 0, inf, 1, 2, 2, 3, 3}), scores, 0.5), "nms: boxes contain inf at box 0");
  CHECK_THROWS_CONTAINING(nms(boxes, scores_of({0.5, -inf}), 0.5), "nms: scores contain -inf at box 1");
  CHECK_THROWS_CONTAINING(nms(boxes, scores_of({nan, 0.5}), 0.5), "nms: scores contain nan at box 0");
}

TEST_CASE("errors/batched_nms: class ids must be int64 and one per box") {
  const Tensor boxes = boxes_of({0, 0, 1, 1, 2, 2, 3, 3}), scores = scores_of({0.5, 0.6});
  CHECK_THROWS_CONTAINING(batched_nms(boxes, scores, from_vector<float>({0, 1}), 0.5),
                          "batched_nms: expected class_ids of dtype int64, got float32");
  CHECK_THROWS_CONTAINING(batched_nms(boxes, scores, from_vector<int64_t>({0, 1, 1}), 0.5),
                          "batched_nms: expected class_ids of shape (N) with N = 2 boxes, got (3,)");
  CHECK_THROWS_CONTAINING(batched_nms(boxes, scores, Tensor(), 0.5), "batched_nms: class_ids is an undefined");
  CHECK_THROWS_CONTAINING(batched_nms(zeros({2, 3}), scores, from_vector<int64_t>({0, 1}), 0.5),
                          "batched_nms: expected boxes of shape (N, 4)");
}

// ---- cuda -----------------------------------------------------------------------------------------------------

MINIDET_CUDA_TEST_CASE("cuda/nms: CUDA keeps exactly the CPU boxes for every size and threshold") {
  // 63 / 64 / 65 and 128 / 129 straddle the 64-box blocks; 20000 is the benchmark size.
  for (int64_t n : {1, 63, 64, 65, 128, 129, 1000, 20000}) {
    for (int variant = 0; variant < 3; ++variant) {
      // 0: spread out (the benchmark's distribution); 1: packed, many tied scores; 2: packed duplicates.
      const double extent = variant == 0 ? 800 : 60 + n / 20.0;
      const BoxSet set = random_set(n, extent, variant == 2, variant >= 1, 100 * n + variant);
      for (double threshold : {0.3, 0.5, 0.7, 0.9}) {
        CAPTURE(n);
        CAPTURE(variant);
        CAPTURE(threshold);
        const Longs cpu = kept(nms(set.boxes, set.scores, threshold));
        const Tensor gpu = nms(set.boxes.cuda(), set.scores.cuda(), threshold);
        CHECK(gpu.is_cuda());
        CHECK(kept(gpu) == cpu);
        if (variant == 1 && n <= 1000) {
          CHECK(kept(nms(set.boxes.to(kFloat64).cuda(), set.scores.to(kFloat64).cuda(), threshold)) ==
                kept(nms(set.boxes.to(kFloat64), set.scores.to(kFloat64), threshold)));
          CHECK(kept(nms(set.boxes.cuda(), set.scores.cuda(), threshold, 1)) ==
                kept(nms(set.boxes, set.scores, threshold, 1)));
        }
      }
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/nms: more than 512 column blocks take the greedy pass's far-column loop") {
  // 40000 boxes = 625 blocks of 64: the reduce kernel's warps watch the first 512 columns to the right of a
  // block, and a plain loop covers the rest. Packed boxes with duplicates keep the CPU reference quick.
  const BoxSet set = random_set(40000, 1500, true, true, 41);
  for (double threshold : {0.5, 0.9}) {
    CAPTURE(threshold);
    CHECK(kept(nms(set.boxes.cuda(), set.scores.cuda(), threshold)) == kept(nms(set.boxes, set.scores, threshold)));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/nms: the hand-checked cases and the same result twice") {
  const Tensor boxes = boxes_of({6, 3, 8, 7, 3, 6, 9, 11, 3, 7, 10, 12, 1, 4, 13, 7}).cuda();
  CHECK(kept(nms(boxes, scores_of({0.6, 0.9, 0.7, 0.2}).cuda(), 0.3)) == Longs{1, 0, 3});
  CHECK(kept(nms(boxes_of({0, 0, 3, 1, 1, 0, 4, 1}).cuda(), scores_of({0.9, 0.8}).cuda(), 0.5)) == Longs{0, 1});
  CHECK(kept(nms(boxes_of({0, 0, 1, 1, 1, 0, 2, 1}).cuda(), scores_of({0.4, 0.8}).cuda(), 0.3, 1)) == Longs{1});
  CHECK(nms(zeros({0, 4}).cuda(), zeros({0}).cuda(), 0.5).is_cuda());
  const BoxSet set = random_set(5000, 300, true, true, 5);
  const Tensor b = set.boxes.cuda(), s = set.scores.cuda();
  CHECK(kept(nms(b, s, 0.5)) == kept(nms(b, s, 0.5)));
}

MINIDET_CUDA_TEST_CASE("cuda/batched_nms: CUDA keeps exactly the CPU boxes with negative coordinates") {
  for (int64_t n : {65, 1000, 5000}) {
    for (int64_t classes : {1, 3, 80}) {
      const BoxSet set = random_set(n, 150, n == 1000, true, 7 * n + classes, classes, /*negative=*/true);
      for (double threshold : {0.3, 0.7}) {
        CAPTURE(n);
        CAPTURE(classes);
        CAPTURE(threshold);
        const Longs cpu = kept(batched_nms(set.boxes, set.scores, set.classes, threshold));
        CHECK(kept(batched_nms(set.boxes.cuda(), set.scores.cuda(), set.classes.cuda(), threshold)) == cpu);
      }
    }
  }
  const Tensor tricky = boxes_of({-14, -14, -9, -9, -10, -10, -5, -5}).cuda();
  CHECK(kept(batched_nms(tricky, scores_of({0.9, 0.8}).cuda(), from_vector<int64_t>({0, 1}).cuda(), 0.5)) ==
        Longs{0, 1});
}

TEST_CASE("values/segmented_nms_mask: batched NMS with each run of rows as its class") {
  for (const auto& [segments, length] : std::vector<std::pair<int64_t, int64_t>>{{1, 70}, {3, 1}, {4, 50}, {2, 0}}) {
    CAPTURE(segments);
    CAPTURE(length);
    const int64_t n = segments * length;
    const BoxSet set = random_set(n, 60, true, true, 7 + n);
    std::vector<int64_t> segment_of;
    for (int64_t i = 0; i < n; ++i) segment_of.push_back(i / length);
    const NmsMask m = segmented_nms_mask(set.boxes, set.scores, segments, 0.5);
    const Longs expected = sorted(kept(batched_nms(set.boxes, set.scores, from_vector<int64_t>(segment_of), 0.5)));
    CHECK(marked(m.keep_mask) == expected);
    CHECK(m.status.to_vector<int64_t>() == Longs{static_cast<int64_t>(expected.size()), 0});
  }
  CHECK_THROWS_CONTAINING(segmented_nms_mask(boxes_of({0, 0, 1, 1, 0, 0, 2, 2, 1, 1, 3, 3}),
                                                          scores_of({0.5, 0.4, 0.3}), 2, 0.5),
                          "segmented_nms_mask: expected a number of segments >= 1 that divides the 3 boxes, got 2");
  CHECK_THROWS_CONTAINING(segmented_nms_mask(boxes_of({0, 0, 1, 1}), scores_of({0.5}), 0, 0.5),
                          "divides the 1 boxes, got 0");
}

MINIDET_CUDA_TEST_CASE("cuda/segmented_nms_mask: one thread block per segment keeps the CPU's rows") {
  // Segment lengths below, at and past one 64-row block, and the RPN's 8 x 1,000; tied scores and duplicate
  // boxes (IoU 1) so that the stable order within each segment matters; zero boxes scored -1 like the RPN's
  // invalid rows. No device-to-host copy.
  for (const auto& [segments, length] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {5, 63}, {3, 64}, {4, 130}, {8, 1000}, {2, 5000}}) {
    CAPTURE(segments);
    CAPTURE(length);
    const int64_t n = segments * length;
    BoxSet set = random_set(n, length < 200 ? 80 : 600, true, true, 3 * n + 1);
    {
      NoGradGuard raw;
      Tensor invalid = lt(rand({n}, kFloat32), 0.2);  // about a fifth of the rows
      set.boxes = where(invalid.unsqueeze(1), zeros({n, 4}), set.boxes);
      set.scores = where(invalid, full({n}, -1.0), set.scores);
    }
    const TransferCounts before = transfer_counts();
    const NmsMask gpu = segmented_nms_mask(set.boxes.cuda(), set.scores.cuda(), segments, 0.7);
    CHECK((transfer_counts() - before).device_to_host == 0);
    const NmsMask cpu = segmented_nms_mask(set.boxes, set.scores, segments, 0.7);
    CHECK(marked(gpu.keep_mask) == marked(cpu.keep_mask));
    CHECK(gpu.status.to_vector<int64_t>() == cpu.status.to_vector<int64_t>());
  }
}

MINIDET_CUDA_TEST_CASE("cuda/batched_nms_mask: the CPU's mask with no device-to-host copy, bad values in status") {
  for (int64_t n : {1, 65, 1000, 20000}) {
    const BoxSet set = random_set(n, n < 1000 ? 100 : 2000, n == 1000, true, 5 * n, 4);
    CAPTURE(n);
    const Tensor boxes = set.boxes.cuda(), scores = set.scores.cuda(), classes = set.classes.cuda();
    const TransferCounts before = transfer_counts();
    const NmsMask gpu = batched_nms_mask(boxes, scores, classes, 0.6);
    CHECK((transfer_counts() - before).device_to_host == 0);
    const NmsMask cpu = batched_nms_mask(set.boxes, set.scores, set.classes, 0.6);
    CHECK(marked(gpu.keep_mask) == marked(cpu.keep_mask));
    CHECK(gpu.status.to_vector<int64_t>() == cpu.status.to_vector<int64_t>());
  }
  const double inf = std::numeric_limits<double>::infinity();
  const NmsMask bad = batched_nms_mask(
      boxes_of({0, 0, 1, inf, 2, 2, 3, 3}).cuda(), scores_of({0.5, 0.6}).cuda(), from_vector<int64_t>({0, 0}).cuda(), 0.5);
  CHECK_THROWS_CONTAINING(check_nms_status("rpn", bad.status.to_vector<int64_t>()),
                          "rpn: boxes contain NaN or Inf");
}

MINIDET_CUDA_TEST_CASE("cuda/nms: errors for mixed devices and values the kernels find") {
  const Tensor boxes = boxes_of({0, 0, 1, 1, 2, 2, 3, 3}), scores = scores_of({0.5, 0.6});
  CHECK_THROWS_CONTAINING(nms(boxes.cuda(), scores, 0.5), "nms: expected boxes and scores on the same device");
  CHECK_THROWS_CONTAINING(batched_nms(boxes.cuda(), scores.cuda(), from_vector<int64_t>({0, 1}), 0.5),
                          "batched_nms: expected boxes and class_ids on the same device");
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_CONTAINING(nms(boxes_of({0, 0, 1, 1, 2, nan, 3, 3}).cuda(), scores.cuda(), 0.5),
                          "nms: boxes contain NaN or Inf");
  CHECK_THROWS_CONTAINING(nms(boxes.cuda(), scores_of({inf, 0.5}).cuda(), 0.5), "nms: scores contain NaN or Inf");
}
