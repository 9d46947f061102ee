// nms_rotated and batched_nms_rotated: the greedy definition on box_iou_rotated's matrix (the brute-force
// reference), the hand cases (ties, IoU exactly at the threshold, the 45-degree octagon, a and a + pi, angle 0
// against ops/nms), classes, errors, and CUDA keeping the CPU's boxes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "core/grad_mode.h"
#include "core/transfer_counts.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"
#include "ops/boxes/box_iou.h"
#include "ops/nms/nms.h"
#include "ops/nms_rotated/nms_rotated.h"
#include "ops/nms_rotated/nms_rotated_kernels.h"
#include "tests/ops/nms_rotated_sets.h"
#include "tests/support.h"

using namespace minidet;
using namespace minidet::test;

// ---- values ---------------------------------------------------------------------------------------------------

TEST_CASE("values/nms_rotated: the greedy definition on box_iou_rotated's matrix for random sets") {
  // A few hundred boxes, spread out or packed (many overlaps), with duplicates (IoU 1, a and a + pi) and tied
  // scores, every threshold from 0 (any overlap suppresses) to 1 (nothing does), float32 and float64.
  for (int variant = 0; variant < 3; ++variant) {
    const BoxSet set = random_set(variant == 0 ? 300 : 257, variant == 0 ? 400 : 90, variant == 2, variant >= 1,
                                  17 + variant);
    for (DType dtype : {kFloat32, kFloat64}) {
      const Tensor boxes = set.boxes.to(dtype), scores = set.scores.to(dtype);
      for (double threshold : {0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0}) {
        CAPTURE(variant);
        CAPTURE(dtype);
        CAPTURE(threshold);
        const Longs got = kept(nms_rotated(boxes, scores, threshold));
        CHECK(got == reference_keep(boxes, scores, Tensor(), threshold));
        if (threshold == 1.0) CHECK(got.size() == static_cast<size_t>(boxes.size(0)));  // IoU <= 1 never > 1
      }
    }
  }
  // The packed sets really suppress: at 0.5 a good share of the boxes goes.
  const BoxSet packed = random_set(257, 90, false, false, 18);
  CHECK(kept(nms_rotated(packed.boxes, packed.scores, 0.5)).size() < 200);
}

TEST_CASE("values/nms_rotated: the prepared pair test is box_iou_rotated's IoU to the bit") {
  // nms_rotated_kernels.h splits rotated_box_iou into a per-box and a per-pair part and claims no bit changes:
  // every pair of a packed random set with duplicates, near-touching and turned copies, far from the origin too.
  for (DType dtype : {kFloat32, kFloat64}) {
    for (double shift : {0.0, 1e4}) {
      BoxSet set = random_set(120, 60, true, false, 5);
      std::vector<double> rows = set.boxes.to_vector<double>();
      for (size_t i = 0; i < rows.size(); i += 5) rows[i] += shift, rows[i + 1] -= shift;
      rows.insert(rows.end(), {shift, -shift, 0, 10, 0.3, shift, -shift, 10, 10, 0.3});  // zero area, its twin
      const Tensor boxes = boxes_of(rows, dtype);
      const int64_t n = boxes.size(0);
      const std::vector<double> matrix = box_iou_rotated(boxes, boxes).to(kFloat64).to_vector<double>();
      const std::vector<double> values = boxes.to(kFloat64).to_vector<double>();
      int64_t mismatches = 0, positive = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double iou;
          if (dtype == kFloat32) {
            std::vector<float> a(values.begin() + 5 * i, values.begin() + 5 * i + 5);
            std::vector<float> b(values.begin() + 5 * j, values.begin() + 5 * j + 5);
            iou = ops::detail::rotated_nms_iou(ops::detail::prepare_rotated_box(a.data()),
                                               ops::detail::prepare_rotated_box(b.data()));
          } else {
            iou = ops::detail::rotated_nms_iou(ops::detail::prepare_rotated_box(&values[5 * i]),
                                               ops::detail::prepare_rotated_box(&values[5 * j]));
          }
          mismatches += iou != matrix[static_cast<size_t>(i * n + j)];
          positive += iou > 0 && i != j;
        }
      CAPTURE(dtype);
      CAPTURE(shift);
      CHECK(mismatches == 0);
      CHECK(positive > 500);  // the set really overlaps
    }
  }
}

TEST_CASE("values/nms_rotated: equal scores keep input order") {
  // Three identical turned boxes with one score: the first in input order survives.
  const std::vector<double> same{5, 5, 10, 4, 0.6, 5, 5, 10, 4, 0.6, 5, 5, 10, 4, 0.6};
  CHECK(kept(nms_rotated(boxes_of(same), scores_of({0.5, 0.5, 0.5}), 0.5)) == Longs{0});
  // Disjoint boxes, tied scores: all kept, in input order among the ties.
  const std::vector<double> apart{0, 0, 2, 1, 0.4, 20, 0, 2, 1, -1, 40, 0, 2, 1, 2, 60, 0, 2, 1, 3};
  CHECK(kept(nms_rotated(boxes_of(apart), scores_of({0.2, 0.7, 0.2, 0.7}), 0.5)) == Longs{1, 3, 0, 2});
}

TEST_CASE("values/nms_rotated: IoU exactly at the threshold keeps both boxes") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    // Identical boxes have IoU exactly 1 (box_iou_rotated.h): at threshold 1 nothing is suppressed.
    const Tensor twins = boxes_of({3, 4, 6, 2, 0.7, 3, 4, 6, 2, 0.7, 3, 4, 6, 2, 0.7}, dtype);
    CHECK(kept(nms_rotated(twins, scores_of({0.1, 0.3, 0.2}, dtype), 1.0)) == Longs{1, 2, 0});
    CHECK(kept(nms_rotated(twins, scores_of({0.1, 0.3, 0.2}, dtype), 0.999)) == Longs{1});
    // By hand: 3 x 1 boxes at angle 0 shifted by 1 share a 2 x 1 rectangle, union 4: IoU exactly 0.5 (every
    // step exact: sin 0 = 0, cos 0 = 1, small dyadic coordinates).
    const Tensor boxes = boxes_of({1.5, 0.5, 3, 1, 0, 2.5, 0.5, 3, 1, 0}, dtype);
    CHECK(box_iou_rotated(boxes, boxes).to(kFloat64).to_vector<double>()[1] == 0.5);
    CHECK(kept(nms_rotated(boxes, scores_of({0.9, 0.8}, dtype), 0.5)) == Longs{0, 1});
    CHECK(kept(nms_rotated(boxes, scores_of({0.9, 0.8}, dtype), 0.49)) == Longs{0});
  }
}

TEST_CASE("values/nms_rotated: a square and itself turned 45 degrees at IoU 1 over sqrt 2") {
  // The two 2 x 2 squares meet in a regular octagon of area 8 (sqrt 2 - 1): IoU = 1 / sqrt 2 = 0.7071.
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor boxes = boxes_of({10, 10, 2, 2, 0, 10, 10, 2, 2, kPi / 4, 30, 10, 2, 2, 0}, dtype);
    const Tensor scores = scores_of({0.4, 0.8, 0.6}, dtype);
    CHECK(kept(nms_rotated(boxes, scores, 0.7)) == Longs{1, 2});
    CHECK(kept(nms_rotated(boxes, scores, 0.71)) == Longs{1, 2, 0});
  }
}

TEST_CASE("values/nms_rotated: a and a plus or minus pi name the same box and suppress each other") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const double a = 0.3;
    const Tensor boxes = boxes_of({7, 9, 12, 3, a, 7, 9, 12, 3, a + kPi, 7, 9, 12, 3, a - kPi, 7, 9, -12, 3, a}, dtype);
    CHECK(kept(nms_rotated(boxes, scores_of({0.5, 0.9, 0.7, 0.6}, dtype), 0.99)) == Longs{1});
    // Seen from the other side too: the best box may be any of them.
    CHECK(kept(nms_rotated(boxes, scores_of({0.9, 0.5, 0.7, 0.6}, dtype), 0.99)) == Longs{0});
  }
}

TEST_CASE("values/nms_rotated: angle 0 gives nms on the same boxes as corners") {
  // Integer centres and even sizes: (cx, cy, w, h, 0) and (cx - w/2, cy - h/2, cx + w/2, cy + h/2) are the
  // same boxes exactly. The two IoUs may round differently in the last bits, so the thresholds are checked to
  // lie at least 1e-5 from every pair's IoU first (the IoUs are ratios of integers: no round thresholds).
  Generator g(3);
  std::vector<double> rotated, corners, scores;
  for (int i = 0; i < 300; ++i) {
    const double cx = static_cast<double>(g.next_int(0, 120)), cy = static_cast<double>(g.next_int(0, 120));
    const double w = 2.0 * static_cast<double>(g.next_int(3, 15)), h = 2.0 * static_cast<double>(g.next_int(3, 15));
    rotated.insert(rotated.end(), {cx, cy, w, h, 0});
    corners.insert(corners.end(), {cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2});
    scores.push_back(g.next_uniform());
  }
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor boxes = boxes_of(rotated, dtype);
    const Tensor xyxy = from_vector<double>(corners, {300, 4}).to(dtype);
    const Tensor s = scores_of(scores, dtype);
    const std::vector<double> iou = box_iou(xyxy, xyxy).to(kFloat64).to_vector<double>();
    for (double threshold : {0.2137, 0.4529, 0.6781}) {
      CAPTURE(dtype);
      CAPTURE(threshold);
      double nearest = 1;
      for (double v : iou) nearest = std::min(nearest, std::fabs(v - threshold));
      REQUIRE(nearest > 1e-5);
      const Longs axis_aligned = kept(nms(xyxy, s, threshold));
      CHECK(kept(nms_rotated(boxes, s, threshold)) == axis_aligned);
      CHECK(axis_aligned.size() < 300);
    }
  }
}

TEST_CASE("values/nms_rotated: zero-area boxes empty and single inputs") {
  // Zero width or height: IoU 0 with everything, itself included, so never suppressed and never suppressing.
  const Tensor boxes = boxes_of({2, 2, 0, 5, 0.2, 2, 2, 0, 5, 0.2, 2, 2, 4, 0, 1, 2, 2, 4, 4, 0.2});
  CHECK(kept(nms_rotated(boxes, scores_of({0.1, 0.2, 0.3, 0.4}), 0.0)) == Longs{3, 2, 1, 0});
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor none = nms_rotated(zeros({0, 5}, dtype), zeros({0}, dtype), 0.5);
    CHECK(none.sizes() == Shape{0});
    CHECK(none.dtype() == kInt64);
    const Tensor none_batched = batched_nms_rotated(zeros({0, 5}, dtype), zeros({0}, dtype), zeros({0}, kInt64), 0.5);
    CHECK(none_batched.sizes() == Shape{0});
    CHECK(none_batched.dtype() == kInt64);
  }
  CHECK(kept(nms_rotated(boxes_of({1, 1, 2, 2, 0.5}), scores_of({0.3}), 0.5)) == Longs{0});
}

TEST_CASE("values/nms_rotated: non-contiguous inputs and inputs that require grad") {
  const BoxSet set = random_set(100, 60, false, false, 9);
  const Longs expected = kept(nms_rotated(set.boxes, set.scores, 0.4));
  const Tensor boxes = set.boxes.t().contiguous().t();  // (100, 5) with strides (1, 100)
  REQUIRE_FALSE(boxes.is_contiguous());
  std::vector<double> spaced;  // every other value of a longer vector: a strided view
  for (double v : set.scores.to_vector<double>()) spaced.insert(spaced.end(), {v, -1.0});
  const Tensor scores = from_vector<double>(spaced).slice(0, 0, 200, 2);
  REQUIRE_FALSE(scores.is_contiguous());
  CHECK(kept(nms_rotated(boxes, scores, 0.4)) == expected);
  Tensor leaf = set.boxes.clone();
  leaf.requires_grad_();
  CHECK(kept(nms_rotated(leaf, set.scores, 0.4)) == expected);
}

TEST_CASE("values/batched_nms_rotated: classes never suppress each other even when their boxes are identical") {
  // Boxes 0 and 1 are identical, in classes 0 and 1: both stay. Box 2 repeats box 0 in class 0: it goes.
  const std::vector<double> box{-100, -80, 30, 10, 1.1};
  std::vector<double> rows;
  for (int i = 0; i < 3; ++i) rows.insert(rows.end(), box.begin(), box.end());
  CHECK(kept(batched_nms_rotated(boxes_of(rows), scores_of({0.5, 0.9, 0.4}), ids_of({0, 1, 0}), 0.5)) == Longs{1, 0});
  // Negative and huge class ids are just labels; the result in descending score order across classes.
  const std::vector<double> pairs{0,  0, 10, 10, 0.3, 0,  0, 10, 10, 0.3, 0,  0, 10, 10, 0.3,
                                  0,  0, 10, 10, 0.3 + kPi, 50, 50, 10, 10, 0.3};
  const Tensor ids = ids_of({int64_t(1) << 60, int64_t(1) << 60, -7, -7, -7});
  for (DType dtype : {kFloat32, kFloat64})
    CHECK(kept(batched_nms_rotated(boxes_of(pairs, dtype), scores_of({0.3, 0.9, 0.8, 0.1, 0.5}, dtype), ids, 0.5)) ==
          Longs{1, 2, 4});
  // One class: the same as nms_rotated.
  const BoxSet set = random_set(300, 120, true, true, 11);
  CHECK(kept(batched_nms_rotated(set.boxes, set.scores, zeros({300}, kInt64), 0.5)) ==
        kept(nms_rotated(set.boxes, set.scores, 0.5)));
}

TEST_CASE("values/batched_nms_rotated: the greedy definition with classes on random sets") {
  for (int64_t classes : {2, 7}) {
    for (bool negative : {false, true}) {
      // With 7 classes, 800 boxes: more than kParallelAboveNmsBoxes, so the classes' passes share the threads.
      const int64_t n = classes == 7 ? 800 : 300;
      const BoxSet set = random_set(n, 80, true, true, 13 * classes + negative, classes, negative);
      for (DType dtype : {kFloat32, kFloat64}) {
        CAPTURE(classes);
        CAPTURE(negative);
        CAPTURE(dtype);
        const Tensor boxes = set.boxes.to(dtype), scores = set.scores.to(dtype);
        CHECK(kept(batched_nms_rotated(boxes, scores, set.classes, 0.4)) ==
              reference_keep(boxes, scores, set.classes, 0.4));
      }
    }
  }
}

// ---- errors ---------------------------------------------------------------------------------------------------

TEST_CASE("errors/nms_rotated: shapes lengths dtypes values and the threshold") {
  const Tensor boxes = boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, 0}), scores = scores_of({0.5, 0.6});
  CHECK_THROWS_CONTAINING(nms_rotated(zeros({2, 4}), scores, 0.5),
                          "nms_rotated: expected boxes of shape (N, 5) with rows (cx, cy, w, h, angle), got (2, 4)");
  CHECK_THROWS_CONTAINING(nms_rotated(zeros({10}), scores, 0.5), "nms_rotated: expected boxes of shape (N, 5)");
  CHECK_THROWS_CONTAINING(nms_rotated(boxes, zeros({2, 1}), 0.5), "nms_rotated: expected scores of shape (N)");
  CHECK_THROWS_CONTAINING(nms_rotated(boxes, scores_of({0.5, 0.6, 0.7}), 0.5),
                          "nms_rotated: expected one score per box, got 2 boxes and 3 scores");
  CHECK_THROWS_CONTAINING(nms_rotated(boxes.to(kInt64), scores, 0.5),
                          "nms_rotated: expected boxes to be float32 or float64");
  CHECK_THROWS_CONTAINING(nms_rotated(boxes, scores.to(kFloat64), 0.5),
                          "nms_rotated: expected boxes and scores of the same dtype");
  CHECK_THROWS_CONTAINING(nms_rotated(boxes, scores, -0.1),
                          "nms_rotated: expected a finite iou_threshold >= 0, got -0.1");
  CHECK_THROWS_CONTAINING(nms_rotated(boxes, scores, kNaN), "iou_threshold");
  CHECK_THROWS_CONTAINING(nms_rotated(boxes, scores, kInf), "iou_threshold");
  CHECK_THROWS_CONTAINING(nms_rotated(Tensor(), scores, 0.5), "nms_rotated: boxes is an undefined tensor");
  CHECK_THROWS_CONTAINING(nms_rotated(boxes, Tensor(), 0.5), "nms_rotated: scores is an undefined tensor");
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor s = scores.to(dtype);
    CHECK_THROWS_CONTAINING(nms_rotated(boxes_of({0, 0, 1, 1, 0, 2, kNaN, 3, 3, 0}, dtype), s, 0.5),
                            "nms_rotated: boxes contain nan at box 1");
    CHECK_THROWS_CONTAINING(nms_rotated(boxes_of({0, 0, kInf, 1, 0, 2, 2, 3, 3, 0}, dtype), s, 0.5),
                            "nms_rotated: boxes contain inf at box 0");
    CHECK_THROWS_CONTAINING(nms_rotated(boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, -kInf}, dtype), s, 0.5),
                            "nms_rotated: boxes contain -inf at box 1");
    CHECK_THROWS_CONTAINING(nms_rotated(boxes.to(dtype), scores_of({0.5, -kInf}, dtype), 0.5),
                            "nms_rotated: scores contain -inf at box 1");
    CHECK_THROWS_CONTAINING(nms_rotated(boxes.to(dtype), scores_of({kNaN, 0.5}, dtype), 0.5),
                            "nms_rotated: scores contain nan at box 0");
  }
}

TEST_CASE("errors/batched_nms_rotated: class ids must be int64 and one per box") {
  const Tensor boxes = boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, 0}), scores = scores_of({0.5, 0.6});
  CHECK_THROWS_CONTAINING(batched_nms_rotated(boxes, scores, from_vector<float>({0, 1}), 0.5),
                          "batched_nms_rotated: expected class_ids of dtype int64, got float32");
  CHECK_THROWS_CONTAINING(batched_nms_rotated(boxes, scores, ids_of({0, 1, 1}), 0.5),
                          "batched_nms_rotated: expected class_ids of shape (N) with N = 2 boxes, got (3,)");
  CHECK_THROWS_CONTAINING(batched_nms_rotated(boxes, scores, Tensor(), 0.5),
                          "batched_nms_rotated: class_ids is an undefined");
  CHECK_THROWS_CONTAINING(batched_nms_rotated(zeros({2, 4}), scores, ids_of({0, 1}), 0.5),
                          "batched_nms_rotated: expected boxes of shape (N, 5)");
  CHECK_THROWS_CONTAINING(batched_nms_rotated(boxes, scores_of({0.5}), ids_of({0, 1}), 0.5),
                          "batched_nms_rotated: expected one score per box");
  CHECK_THROWS_CONTAINING(batched_nms_rotated(boxes, scores, ids_of({0, 1}), -1),
                          "batched_nms_rotated: expected a finite");
  CHECK_THROWS_CONTAINING(batched_nms_rotated(boxes_of({0, 0, 1, 1, kNaN, 2, 2, 3, 3, 0}), scores, ids_of({0, 1}), 0.5),
                          "batched_nms_rotated: boxes contain nan at box 0");
}

// ---- cuda -----------------------------------------------------------------------------------------------------

// CUDA against the CPU on a set kept away from the threshold (away_from_threshold): the same kept indices, in
// the same order, with one device-to-host copy per call.
template <typename T>
void check_cuda_keeps_cpu(const BoxSet& full, double threshold, bool batched) {
  const double margin = sizeof(T) == sizeof(float) ? 1e-4 : 1e-9;
  const BoxSet set = away_from_threshold<T>(full, threshold, margin);
  const DType dtype = DTypeOf<T>::value;
  const Tensor boxes = set.boxes.to(dtype), scores = set.scores.to(dtype);
  const Tensor gpu_boxes = boxes.cuda(), gpu_scores = scores.cuda(), gpu_classes = set.classes.cuda();
  const Longs cpu = kept(batched ? batched_nms_rotated(boxes, scores, set.classes, threshold)
                                 : nms_rotated(boxes, scores, threshold));
  const TransferCounts before = transfer_counts();
  const Tensor gpu = batched ? batched_nms_rotated(gpu_boxes, gpu_scores, gpu_classes, threshold)
                             : nms_rotated(gpu_boxes, gpu_scores, threshold);
  CHECK((transfer_counts() - before).device_to_host == 1);  // the kept count with the finite-value flags
  CHECK(gpu.is_cuda());
  CHECK(kept(gpu) == cpu);
  CHECK(set.boxes.size(0) > full.boxes.size(0) * 9 / 10);  // the margin dropped only a few boxes
}

MINIDET_CUDA_TEST_CASE("cuda/nms_rotated: CUDA keeps the CPU's boxes on random sets of up to 5000") {
  // 63 / 64 / 65 and 129 straddle the 64-box blocks; 5000 boxes packed so that most have neighbours.
  for (int64_t n : {1, 63, 64, 65, 129, 1000, 5000}) {
    for (int variant = 0; variant < 3; ++variant) {
      // 0: spread out; 1: packed with tied scores; 2: packed duplicates (IoU 1, a and a + pi) with tied scores.
      const double extent = variant == 0 ? 1500 : 60 + n / 8.0;
      const BoxSet set = random_set(n, extent, variant == 2, variant >= 1, 100 * n + variant);
      for (double threshold : {0.3, 0.5, 0.7, 0.9}) {
        CAPTURE(n);
        CAPTURE(variant);
        CAPTURE(threshold);
        check_cuda_keeps_cpu<float>(set, threshold, false);
        if (n <= 1000 || threshold == 0.5) check_cuda_keeps_cpu<double>(set, threshold, false);
      }
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/batched_nms_rotated: CUDA keeps the CPU's boxes with negative ids and coordinates") {
  for (int64_t n : {65, 1000, 5000}) {
    for (int64_t classes : {1, 3, 80}) {
      const BoxSet set = random_set(n, 60 + n / 8.0, n == 1000, true, 7 * n + classes, classes, /*negative=*/true);
      for (double threshold : {0.3, 0.7}) {
        CAPTURE(n);
        CAPTURE(classes);
        CAPTURE(threshold);
        check_cuda_keeps_cpu<float>(set, threshold, true);
        check_cuda_keeps_cpu<double>(set, threshold, true);
      }
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/nms_rotated: the hard cases and the same result twice") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    auto gpu = [&](const std::vector<double>& rows, const std::vector<double>& s, double t) {
      return kept(nms_rotated(boxes_of(rows, dtype).cuda(), scores_of(s, dtype).cuda(), t));
    };
    // Ties in input order; identical boxes at threshold 1; IoU exactly 0.5 at threshold 0.5.
    CHECK(gpu({5, 5, 10, 4, 0.6, 5, 5, 10, 4, 0.6, 5, 5, 10, 4, 0.6}, {0.5, 0.5, 0.5}, 0.5) == Longs{0});
    CHECK(gpu({0, 0, 2, 1, 0.4, 20, 0, 2, 1, -1, 40, 0, 2, 1, 2, 60, 0, 2, 1, 3}, {0.2, 0.7, 0.2, 0.7}, 0.5) ==
          Longs{1, 3, 0, 2});
    CHECK(gpu({3, 4, 6, 2, 0.7, 3, 4, 6, 2, 0.7, 3, 4, 6, 2, 0.7}, {0.1, 0.3, 0.2}, 1.0) == Longs{1, 2, 0});
    CHECK(gpu({1.5, 0.5, 3, 1, 0, 2.5, 0.5, 3, 1, 0}, {0.9, 0.8}, 0.5) == Longs{0, 1});
    CHECK(gpu({1.5, 0.5, 3, 1, 0, 2.5, 0.5, 3, 1, 0}, {0.9, 0.8}, 0.49) == Longs{0});
    // The octagon (IoU 0.7071), a and a + pi, zero-area boxes.
    CHECK(gpu({10, 10, 2, 2, 0, 10, 10, 2, 2, kPi / 4, 30, 10, 2, 2, 0}, {0.4, 0.8, 0.6}, 0.7) == Longs{1, 2});
    CHECK(gpu({7, 9, 12, 3, 0.3, 7, 9, 12, 3, 0.3 + kPi, 7, 9, 12, 3, 0.3 - kPi}, {0.5, 0.9, 0.7}, 0.99) == Longs{1});
    CHECK(gpu({2, 2, 0, 5, 0.2, 2, 2, 0, 5, 0.2, 2, 2, 4, 0, 1}, {0.1, 0.2, 0.3}, 0.0) == Longs{2, 1, 0});
    // Classes never suppress each other, identical boxes included.
    const Tensor twins = boxes_of({-100, -80, 30, 10, 1.1, -100, -80, 30, 10, 1.1, -100, -80, 30, 10, 1.1}, dtype);
    CHECK(kept(batched_nms_rotated(twins.cuda(), scores_of({0.5, 0.9, 0.4}, dtype).cuda(), ids_of({-3, 4, -3}).cuda(),
                                   0.5)) == Longs{1, 0});
    // Empty input.
    const Tensor none = nms_rotated(zeros({0, 5}, dtype).cuda(), zeros({0}, dtype).cuda(), 0.5);
    CHECK(none.is_cuda());
    CHECK(none.sizes() == Shape{0});
  }
  const BoxSet set = random_set(5000, 600, true, true, 5);
  const Tensor b = set.boxes.to(kFloat32).cuda(), s = set.scores.to(kFloat32).cuda();
  CHECK(kept(nms_rotated(b, s, 0.5)) == kept(nms_rotated(b, s, 0.5)));
}

MINIDET_CUDA_TEST_CASE("cuda/nms_rotated: errors for mixed devices and values the kernels find") {
  const Tensor boxes = boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, 0}), scores = scores_of({0.5, 0.6});
  CHECK_THROWS_CONTAINING(nms_rotated(boxes.cuda(), scores, 0.5),
                          "nms_rotated: expected boxes and scores on the same device");
  CHECK_THROWS_CONTAINING(batched_nms_rotated(boxes.cuda(), scores.cuda(), ids_of({0, 1}), 0.5),
                          "batched_nms_rotated: expected boxes and class_ids on the same device");
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor s = scores.to(dtype).cuda();
    CHECK_THROWS_CONTAINING(nms_rotated(boxes_of({0, 0, 1, 1, 0, 2, kNaN, 3, 3, 0}, dtype).cuda(), s, 0.5),
                            "nms_rotated: boxes contain NaN or Inf");
    CHECK_THROWS_CONTAINING(nms_rotated(boxes_of({0, 0, 1, 1, kInf, 2, 2, 3, 3, 0}, dtype).cuda(), s, 0.5),
                            "nms_rotated: boxes contain NaN or Inf");
    CHECK_THROWS_CONTAINING(nms_rotated(boxes.to(dtype).cuda(), scores_of({kInf, 0.5}, dtype).cuda(), 0.5),
                            "nms_rotated: scores contain NaN or Inf");
    CHECK_THROWS_CONTAINING(batched_nms_rotated(boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, kNaN}, dtype).cuda(), s,
                                                ids_of({0, 1}).cuda(), 0.5),
                            "batched_nms_rotated: boxes contain NaN or Inf");
  }
}
