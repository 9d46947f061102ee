// segmented_nms_rotated_mask and batched_nms_rotated_mask: the mask marks exactly the rows nms_rotated keeps in
// each segment (batched_nms_rotated in each class) and the status counts them; the hand cases (ties, identical
// boxes, IoU exactly at the threshold) segment by segment; errors; CUDA marking the CPU's rows with no
// device-to-host copy, and bad values reported through the status.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/factories.h"
#include "core/generator.h"
#include "core/transfer_counts.h"
#include "ops/indexing/nonzero.h"
#include "ops/nms/nms_mask.h"
#include "ops/nms_rotated/nms_rotated.h"
#include "ops/nms_rotated/nms_rotated_mask.h"
#include "tests/ops/nms_rotated_sets.h"
#include "tests/support.h"

using namespace minidet;
using namespace minidet::test;

namespace {

using SegmentShape = std::pair<int64_t, int64_t>;  // (segments, rows per segment)

// The rows a keep mask marks, in index order.
Longs marked(const Tensor& mask) {
  CHECK(mask.dtype() == kBool);
  CHECK(mask.dim() == 1);
  return kept(flat_nonzero(mask.cpu()));
}

// The definition, segment by segment: nms_rotated on each segment's own rows, its indices moved to the
// segment's first row, in index order (the rows a mask marks).
Longs per_segment_keep(const Tensor& boxes, const Tensor& scores, int64_t segments, double threshold) {
  Longs rows;
  const int64_t length = boxes.size(0) / segments;
  for (int64_t s = 0; s < segments && length > 0; ++s) {
    const Tensor b = boxes.narrow(0, s * length, length), sc = scores.narrow(0, s * length, length);
    for (int64_t i : kept(nms_rotated(b, sc, threshold))) rows.push_back(s * length + i);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

// A mask of n rows that marks `expected` and counts it, with no flags.
void check_mask(const NmsMask& m, int64_t n, const Longs& expected) {
  CHECK(m.keep_mask.sizes() == Shape{n});
  CHECK(marked(m.keep_mask) == expected);
  CHECK(m.status.dtype() == kInt64);
  CHECK(m.status.cpu().to_vector<int64_t>() == Longs{static_cast<int64_t>(expected.size()), 0});
}

// The hand cases, on `device` (the CPU, or CUDA for the cuda/ case), each with the rows it must mark.
void check_hand_cases(Device device, DType dtype) {
  auto mask = [&](const std::vector<double>& rows, const std::vector<double>& s, int64_t segments, double t) {
    return marked(
        segmented_nms_rotated_mask(boxes_of(rows, dtype).to(device), scores_of(s, dtype).to(device), segments, t)
            .keep_mask);
  };
  const std::vector<double> box{5, 5, 10, 4, 0.6};
  std::vector<double> six;  // one box six times: two segments of three identical boxes
  for (int i = 0; i < 6; ++i) six.insert(six.end(), box.begin(), box.end());
  // Equal scores: the first row of each segment survives; identical boxes of different segments never
  // suppress each other. As one segment, only row 0 survives.
  CHECK(mask(six, {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, 2, 0.5) == Longs{0, 3});
  CHECK(mask(six, {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, 1, 0.5) == Longs{0});
  CHECK(mask(six, {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, 6, 0.5) == Longs{0, 1, 2, 3, 4, 5});
  // The best of each segment wins, wherever it stands; IoU exactly 1 at threshold 1 keeps everything.
  CHECK(mask(six, {0.1, 0.3, 0.2, 0.9, 0.8, 0.95}, 2, 0.5) == Longs{1, 5});
  CHECK(mask(six, {0.1, 0.3, 0.2, 0.9, 0.8, 0.95}, 2, 1.0) == Longs{0, 1, 2, 3, 4, 5});
  // 3 x 1 boxes at angle 0 shifted by 1: IoU exactly 0.5 (values/nms_rotated), in each of two segments.
  const std::vector<double> halves{1.5, 0.5, 3, 1, 0, 2.5, 0.5, 3, 1, 0, 1.5, 0.5, 3, 1, 0, 2.5, 0.5, 3, 1, 0};
  CHECK(mask(halves, {0.9, 0.8, 0.7, 0.95}, 2, 0.5) == Longs{0, 1, 2, 3});
  CHECK(mask(halves, {0.9, 0.8, 0.7, 0.95}, 2, 0.49) == Longs{0, 3});
  // The 45-degree octagon (IoU 0.7071) and a box apart, in one of two segments; a and a + pi in the other.
  const std::vector<double> mixed{10, 10, 2, 2, 0, 10, 10, 2, 2, kPi / 4, 30, 10, 2, 2, 0,
                                  7, 9, 12, 3, 0.3, 7, 9, 12, 3, 0.3 + kPi, 7, 9, -12, 3, 0.3};
  CHECK(mask(mixed, {0.4, 0.8, 0.6, 0.5, 0.9, 0.7}, 2, 0.7) == Longs{1, 2, 4});
  CHECK(mask(mixed, {0.4, 0.8, 0.6, 0.5, 0.9, 0.7}, 2, 0.71) == Longs{0, 1, 2, 4});
  // Zero-area boxes are never suppressed; N = 0 gives an empty mask and status (0, 0).
  CHECK(mask({2, 2, 0, 5, 0.2, 2, 2, 0, 5, 0.2, 2, 2, 4, 0, 1, 2, 2, 4, 4, 0.2}, {0.1, 0.2, 0.3, 0.4}, 2, 0.0) ==
        Longs{0, 1, 2, 3});
  for (int64_t segments : {1, 3}) {
    const NmsMask none =
        segmented_nms_rotated_mask(zeros({0, 5}, dtype).to(device), zeros({0}, dtype).to(device), segments, 0.5);
    CHECK(none.keep_mask.device() == device);
    CHECK(none.status.device() == device);
    check_mask(none, 0, {});
  }
}

}  // namespace

// ---- values ---------------------------------------------------------------------------------------------------

TEST_CASE("values/segmented_nms_rotated_mask: nms_rotated on each segment's rows as a mask") {
  // One segment, one row per segment, many short segments, segments across a 64-row block, no rows; packed
  // boxes with duplicates (IoU 1, a and a + pi) and tied scores, so that the order within a segment matters.
  for (const SegmentShape& shape :
       std::vector<SegmentShape>{{1, 70}, {3, 1}, {4, 50}, {16, 20}, {64, 3}, {2, 130}, {2, 0}, {1, 0}}) {
    const auto [segments, length] = shape;
    const int64_t n = segments * length;
    const BoxSet set = random_set(n, 60, n % 2 == 0, true, 7 + n + segments);
    for (DType dtype : {kFloat32, kFloat64}) {
      const Tensor boxes = set.boxes.to(dtype), scores = set.scores.to(dtype);
      for (double threshold : {0.0, 0.3, 0.5, 0.9, 1.0}) {
        CAPTURE(segments);
        CAPTURE(length);
        CAPTURE(dtype);
        CAPTURE(threshold);
        check_mask(segmented_nms_rotated_mask(boxes, scores, segments, threshold), n,
                   per_segment_keep(boxes, scores, segments, threshold));
      }
    }
  }
  // The segments really suppress, and really keep apart: packed at 0.5 many rows go, and the same rows as
  // one segment lose more.
  const BoxSet packed = random_set(400, 60, false, false, 3);
  const Longs four = marked(segmented_nms_rotated_mask(packed.boxes, packed.scores, 4, 0.5).keep_mask);
  const Longs one = marked(segmented_nms_rotated_mask(packed.boxes, packed.scores, 1, 0.5).keep_mask);
  CHECK(four.size() < 300);
  CHECK(one.size() < four.size());
}

TEST_CASE("values/segmented_nms_rotated_mask: ties identical boxes and IoU at the threshold per segment") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    check_hand_cases(Device::cpu(), dtype);
  }
}

TEST_CASE("values/segmented_nms_rotated_mask: non-contiguous inputs and inputs that require grad") {
  const BoxSet set = random_set(120, 60, false, false, 9);
  const Longs expected = per_segment_keep(set.boxes, set.scores, 3, 0.4);
  const Tensor boxes = set.boxes.t().contiguous().t();  // (120, 5) with strides (1, 120)
  REQUIRE_FALSE(boxes.is_contiguous());
  CHECK(marked(segmented_nms_rotated_mask(boxes, set.scores, 3, 0.4).keep_mask) == expected);
  Tensor leaf = set.boxes.clone();
  leaf.requires_grad_();
  const NmsMask m = segmented_nms_rotated_mask(leaf, set.scores, 3, 0.4);
  CHECK_FALSE(m.keep_mask.requires_grad());
  CHECK(marked(m.keep_mask) == expected);
}

TEST_CASE("values/batched_nms_rotated_mask: marks exactly batched_nms_rotated's rows and counts them") {
  for (int64_t n : {0, 1, 64, 200}) {
    const BoxSet set = random_set(n, 80, n == 200, true, 31 + n, 3, /*negative=*/n == 64);
    CAPTURE(n);
    Longs expected = kept(batched_nms_rotated(set.boxes, set.scores, set.classes, 0.5));
    std::sort(expected.begin(), expected.end());
    check_mask(batched_nms_rotated_mask(set.boxes, set.scores, set.classes, 0.5), n, expected);
  }
}

// ---- errors ---------------------------------------------------------------------------------------------------

TEST_CASE("errors/segmented_nms_rotated_mask: shapes segments values and the threshold") {
  const Tensor boxes = boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, 0, 4, 4, 1, 1, 0, 6, 6, 1, 1, 0});
  const Tensor scores = scores_of({0.5, 0.6, 0.7, 0.8});
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(zeros({4, 4}), scores, 2, 0.5),
                          "segmented_nms_rotated_mask: expected boxes of shape (N, 5) with rows (cx, cy, w, h, angle)");
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(boxes, scores_of({0.5, 0.6}), 2, 0.5),
                          "segmented_nms_rotated_mask: expected one score per box, got 4 boxes and 2 scores");
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(boxes.to(kInt64), scores, 2, 0.5),
                          "segmented_nms_rotated_mask: expected boxes to be float32 or float64");
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(boxes, scores.to(kFloat64), 2, 0.5),
                          "segmented_nms_rotated_mask: expected boxes and scores of the same dtype");
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(boxes, scores, 3, 0.5),
                          "segmented_nms_rotated_mask: expected a number of segments >= 1 that divides the 4 boxes, "
                          "got 3");
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(boxes, scores, 0, 0.5), "divides the 4 boxes, got 0");
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(boxes, scores, -2, 0.5), "divides the 4 boxes, got -2");
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(zeros({0, 5}), zeros({0}), 0, 0.5), "divides the 0 boxes, got 0");
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(boxes, scores, 2, -0.1),
                          "segmented_nms_rotated_mask: expected a finite iou_threshold >= 0, got -0.1");
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(boxes, scores, 2, kNaN), "iou_threshold");
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(Tensor(), scores, 2, 0.5),
                          "segmented_nms_rotated_mask: boxes is an undefined tensor");
  // On the CPU a bad value throws at once, naming the input row (not the row within its segment).
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    const Tensor s = scores.to(dtype);
    CHECK_THROWS_CONTAINING(
        segmented_nms_rotated_mask(boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, 0, 4, 4, 1, 1, 0, 6, kNaN, 1, 1, 0}, dtype), s,
                                   2, 0.5),
        "segmented_nms_rotated_mask: boxes contain nan at box 3");
    CHECK_THROWS_CONTAINING(
        segmented_nms_rotated_mask(boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, 0, 4, 4, 1, 1, -kInf, 6, 6, 1, 1, 0}, dtype),
                                   s, 4, 0.5),
        "segmented_nms_rotated_mask: boxes contain -inf at box 2");
    const Tensor bad_scores = scores_of({0.5, 0.6, kInf, 0.8}, dtype);
    CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(boxes.to(dtype), bad_scores, 2, 0.5),
                            "segmented_nms_rotated_mask: scores contain inf at box 2");
  }
}

// The message `run` throws, without its location; empty when it does not throw.
template <typename Run>
std::string error_of(Run run) {
  try {
    run();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

TEST_CASE("errors/batched_nms_rotated_mask: batched_nms_rotated's errors under its own name") {
  const Tensor boxes = boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, 0}), scores = scores_of({0.5, 0.6});
  struct BadInput {
    const char* what;
    Tensor boxes, scores, class_ids;
  };
  const std::vector<BadInput> inputs{
      {"float class ids", boxes, scores, from_vector<float>({0, 1})},
      {"one class id too many", boxes, scores, ids_of({0, 1, 1})},
      {"no class ids", boxes, scores, Tensor()},
      {"4 columns", zeros({2, 4}), scores, ids_of({0, 1})},
      {"one score short", boxes, scores_of({0.5}), ids_of({0, 1})},
      {"a NaN angle", boxes_of({0, 0, 1, 1, kNaN, 2, 2, 3, 3, 0}), scores, ids_of({0, 1})},
      {"an Inf score", boxes, scores_of({0.5, kInf}), ids_of({0, 1})},
  };
  const std::string list_op = "batched_nms_rotated: ", mask_op = "batched_nms_rotated_mask: ";
  for (const BadInput& bad : inputs) {
    CAPTURE(bad.what);
    const std::string list = error_of([&] { (void)batched_nms_rotated(bad.boxes, bad.scores, bad.class_ids, 0.5); });
    const std::string mask =
        error_of([&] { (void)batched_nms_rotated_mask(bad.boxes, bad.scores, bad.class_ids, 0.5); });
    REQUIRE(list.rfind(list_op, 0) == 0);
    CHECK(mask == mask_op + list.substr(list_op.size()));
  }
}

// ---- cuda -----------------------------------------------------------------------------------------------------

// `segments` runs of `length` rows, each a packed random set (duplicates in every other run, tied scores) kept
// away from `threshold` (away_from_threshold: CPU and CUDA must agree there, whatever the last bit of sin and
// cos), about a fifth of the rows replaced by zero-area boxes scored -1 like a detector's padding rows.
template <typename T>
BoxSet segmented_set(int64_t segments, int64_t length, double threshold, uint64_t seed) {
  const double margin = sizeof(T) == sizeof(float) ? 1e-4 : 1e-9;
  Generator padding(seed);
  std::vector<double> rows, scores;
  for (int64_t s = 0; s < segments; ++s) {
    const BoxSet full = random_set(length + length / 4 + 4, 60 + length / 8.0, s % 2 == 1, true, seed + 7 * s);
    const BoxSet set = away_from_threshold<T>(full, threshold, margin);
    REQUIRE(set.boxes.size(0) >= length);
    const std::vector<double> b = set.boxes.to_vector<double>(), sc = set.scores.to_vector<double>();
    for (int64_t i = 0; i < length; ++i) {
      if (padding.next_uniform() < 0.2) {
        rows.insert(rows.end(), {0, 0, 0, 0, 0});
        scores.push_back(-1.0);
      } else {
        rows.insert(rows.end(), b.begin() + 5 * i, b.begin() + 5 * i + 5);
        scores.push_back(sc[static_cast<size_t>(i)]);
      }
    }
  }
  return {boxes_of(rows, kFloat64), scores_of(scores, kFloat64), Tensor()};
}

MINIDET_CUDA_TEST_CASE("cuda/segmented_nms_rotated_mask: the CPU's mask with no device-to-host copy") {
  // Segment lengths below, at and past one 64-row block, and a detector's 8 x 1,000 and 2 x 5,000.
  for (const SegmentShape& shape :
       std::vector<SegmentShape>{{1, 1}, {5, 63}, {3, 64}, {4, 130}, {8, 1000}, {2, 5000}}) {
    const auto [segments, length] = shape;
    for (double threshold : {0.5, 0.7}) {
      for (DType dtype : {kFloat32, kFloat64}) {
        if (dtype == kFloat64 && length > 1000) continue;
        CAPTURE(segments);
        CAPTURE(length);
        CAPTURE(threshold);
        CAPTURE(dtype);
        const BoxSet set = dtype == kFloat32 ? segmented_set<float>(segments, length, threshold, 3 * length + 1)
                                             : segmented_set<double>(segments, length, threshold, 3 * length + 1);
        const Tensor boxes = set.boxes.to(dtype), scores = set.scores.to(dtype);
        const Tensor gpu_boxes = boxes.cuda(), gpu_scores = scores.cuda();
        const TransferCounts before = transfer_counts();
        const NmsMask gpu = segmented_nms_rotated_mask(gpu_boxes, gpu_scores, segments, threshold);
        CHECK((transfer_counts() - before).device_to_host == 0);
        CHECK(gpu.keep_mask.is_cuda());
        CHECK(gpu.status.is_cuda());
        const NmsMask cpu = segmented_nms_rotated_mask(boxes, scores, segments, threshold);
        CHECK(marked(gpu.keep_mask) == marked(cpu.keep_mask));
        CHECK(gpu.status.to_vector<int64_t>() == cpu.status.to_vector<int64_t>());
        CHECK(marked(cpu.keep_mask) == per_segment_keep(boxes, scores, segments, threshold));
      }
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/segmented_nms_rotated_mask: the hand cases and bad values in the status") {
  for (DType dtype : {kFloat32, kFloat64}) {
    CAPTURE(dtype);
    check_hand_cases(Device::cuda(), dtype);
    // NaN or Inf: no throw and no copy; the status carries the flags, and check_nms_status throws.
    const Tensor boxes = boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, 0, 4, 4, 1, 1, 0, 6, kNaN, 1, 1, 0}, dtype).cuda();
    const Tensor scores = scores_of({0.5, 0.6, 0.7, 0.8}, dtype).cuda();
    const Tensor bad_scores = scores_of({0.5, kInf, 0.7, 0.8}, dtype).cuda();
    const Tensor good_boxes = boxes_of({0, 0, 1, 1, 0, 2, 2, 3, 3, 0, 4, 4, 1, 1, 0, 6, 6, 1, 1, 0}, dtype).cuda();
    const TransferCounts before = transfer_counts();
    const NmsMask bad_box = segmented_nms_rotated_mask(boxes, scores, 2, 0.5);
    const NmsMask bad_score = segmented_nms_rotated_mask(good_boxes, bad_scores, 2, 0.5);
    const NmsMask both = segmented_nms_rotated_mask(boxes, bad_scores, 4, 0.5);
    CHECK((transfer_counts() - before).device_to_host == 0);
    CHECK(bad_box.status.to_vector<int64_t>()[1] == kNmsBadBoxFlag);
    CHECK(bad_score.status.to_vector<int64_t>()[1] == kNmsBadScoreFlag);
    CHECK(both.status.to_vector<int64_t>()[1] == (kNmsBadBoxFlag | kNmsBadScoreFlag));
    CHECK_THROWS_CONTAINING(check_nms_status("rpn", bad_box.status.to_vector<int64_t>()),
                            "rpn: boxes contain NaN or Inf");
    CHECK_THROWS_CONTAINING(check_nms_status("rpn", bad_score.status.to_vector<int64_t>()),
                            "rpn: scores contain NaN or Inf");
  }
  // Mixed devices are refused before any kernel.
  CHECK_THROWS_CONTAINING(segmented_nms_rotated_mask(boxes_of({0, 0, 1, 1, 0}).cuda(), scores_of({0.5}), 1, 0.5),
                          "segmented_nms_rotated_mask: expected boxes and scores on the same device");
}

MINIDET_CUDA_TEST_CASE("cuda/batched_nms_rotated_mask: the CPU's mask with no device-to-host copy") {
  for (int64_t n : {1, 65, 1000, 5000}) {
    CAPTURE(n);
    const BoxSet set = away_from_threshold<float>(random_set(n, 60 + n / 8.0, n == 1000, true, 5 * n, 4), 0.6, 1e-4);
    const Tensor boxes = set.boxes.to(kFloat32), scores = set.scores.to(kFloat32);
    const Tensor gpu_boxes = boxes.cuda(), gpu_scores = scores.cuda(), gpu_classes = set.classes.cuda();
    const TransferCounts before = transfer_counts();
    const NmsMask gpu = batched_nms_rotated_mask(gpu_boxes, gpu_scores, gpu_classes, 0.6);
    CHECK((transfer_counts() - before).device_to_host == 0);
    const NmsMask cpu = batched_nms_rotated_mask(boxes, scores, set.classes, 0.6);
    CHECK(marked(gpu.keep_mask) == marked(cpu.keep_mask));
    CHECK(gpu.status.to_vector<int64_t>() == cpu.status.to_vector<int64_t>());
  }
}
