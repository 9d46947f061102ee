// Evaluation with rotated boxes (data/eval/eval_types.h): the same VOC and COCO algorithms, overlap measured
// with rotated IoU. Hand-built cases whose scores are known by hand, worked out in the comments; the
// reference script (tests/reference/rotated_eval_reference.py) checks many more against shapely.
#include <cmath>

#include "data/eval/coco_eval.h"
#include "data/eval/voc_eval.h"
#include "data/shapes/rotated_shapes_dataset.h"
#include "tests/support.h"

using namespace minidet::data;

namespace {

constexpr double kPi = 3.14159265358979323846;

// Rotated ground truth: one category (1 "bar") and two images (1, 2); area = w * h unless given.
GroundTruth rotated_truth(const std::vector<RotatedBox>& boxes, const std::vector<bool>& crowd = {},
                          const std::vector<int64_t>& images = {}) {
  GroundTruth truth;
  truth.image_ids = {1, 2};
  truth.category_ids = {1};
  truth.category_names = {"bar"};
  truth.rotated = true;
  for (size_t i = 0; i < boxes.size(); ++i) {
    const bool is_crowd = i < crowd.size() && crowd[i];
    truth.objects.push_back({static_cast<int64_t>(i) + 1, i < images.size() ? images[i] : 1, 1,
                             bounding_box(boxes[i]), boxes[i].area(), is_crowd, boxes[i]});
  }
  return truth;
}

double voc_map(const GroundTruth& truth, const std::vector<Detection>& detections) {
  return evaluate_voc(truth, detections).mean_average_precision;
}

// A 100 x 100 square (area 10^4: COCO's "large") at angle 0, and the same square turned by 45 degrees. Their
// overlap is the regular octagon, area 8 (sqrt 2 - 1) (50)^2, so
//   rotated IoU = 8 (sqrt 2 - 1) / (8 - 8 (sqrt 2 - 1)) = (sqrt 2 - 1) / (2 - sqrt 2) = 1 / sqrt 2 = 0.7071,
// while the turned square's bounding box (side 100 sqrt 2) has axis-aligned IoU 10^4 / (2 10^4) = 0.5 with
// the square: not above VOC's threshold.
const RotatedBox kSquare{50, 50, 100, 100, 0};
const RotatedBox kTurned{50, 50, 100, 100, kPi / 4};

}  // namespace

TEST_CASE("values/rotated_box: intersection area and crowd overlap of rotated boxes") {
  const RotatedBox square{0, 0, 2, 2, 0}, turned{0, 0, 2, 2, kPi / 4};
  CHECK(rotated_intersection_area(square, turned) == doctest::Approx(8 * (std::sqrt(2.0) - 1)).epsilon(1e-14));
  CHECK(rotated_box_iou(square, turned) == doctest::Approx(1 / std::sqrt(2.0)).epsilon(1e-14));
  // A box inside another: the clip gives back its own corners, so the overlap is exactly 1.
  const RotatedBox region{10, 10, 40, 12, 0.4}, inside{11, 10.5, 6, 3, -1.1};
  CHECK(rotated_intersection_area(inside, region) == doctest::Approx(18).epsilon(1e-14));
  CHECK(rotated_crowd_overlap(inside, region) == 1.0);
  CHECK(rotated_crowd_overlap(region, inside) == doctest::Approx(18.0 / 480).epsilon(1e-14));
  CHECK(rotated_crowd_overlap(square, {10, 0, 2, 2, 0.3}) == 0.0);  // apart
  CHECK(rotated_crowd_overlap({0, 0, 0, 2, 0.3}, square) == 0.0);   // an empty detection
  CHECK(std::isnan(rotated_crowd_overlap({0, 0, 2, 2, NAN}, square)));
}

TEST_CASE("values/rotated_eval: identical rotated boxes score 1 at any angle") {
  const std::vector<RotatedBox> boxes = {{20, 30, 40, 8, 0.3}, {60, 20, 30, 12, -1.2}, {50, 50, 12, 40, -kPi / 2}};
  const GroundTruth truth = rotated_truth(boxes, {}, {1, 1, 2});
  std::vector<Detection> detections;
  for (size_t i = 0; i < boxes.size(); ++i)
    detections.push_back(rotated_detection(truth.objects[i].image_id, 1, boxes[i], 0.9 - 0.1 * i));
  detections[1].rotated_box.angle += kPi;  // the same box, described by another angle
  CHECK(voc_map(truth, detections) == doctest::Approx(1.0));
  const CocoEvalResult coco = evaluate_coco(truth, detections);
  CHECK(coco.rotated_iou);
  CHECK(coco.stats[0] == doctest::Approx(1.0));
  CHECK(coco.stats[8] == doctest::Approx(1.0));
}

TEST_CASE("values/rotated_eval: the 45-degree square passes at 0.5 with rotated IoU and not with its bounding box") {
  const GroundTruth truth = rotated_truth({kSquare});
  const std::vector<Detection> detections = {rotated_detection(1, 1, kTurned, 0.9)};
  CHECK(voc_map(truth, detections) == doctest::Approx(1.0));
  // IoU 0.7071 clears the COCO thresholds 0.50 .. 0.70 (5 of 10): AP = 0.5, AP50 = 1, AP75 = 0.
  const CocoEvalResult coco = evaluate_coco(truth, detections);
  CHECK(coco.stats[0] == doctest::Approx(0.5));
  CHECK(coco.stats[1] == doctest::Approx(1.0));
  CHECK(coco.stats[2] == doctest::Approx(0.0));

  // The same boxes, axis-aligned: the bounding box's IoU is 0.5, not above VOC's threshold.
  GroundTruth axis_aligned = truth;
  axis_aligned.rotated = false;
  const std::vector<Detection> bounding = {{1, 1, detections[0].box, 0.9}};
  CHECK(voc_map(axis_aligned, bounding) == 0.0);
  CHECK_FALSE(evaluate_voc(axis_aligned, bounding).rotated_iou);
}

TEST_CASE("values/rotated_eval: a bar turned the other way misses though its bounding box is the same") {
  const RotatedBox bar{32, 32, 40, 4, 0.3}, mirrored{32, 32, 40, 4, -0.3};
  const Box bounds = bounding_box(bar);
  CHECK(std::abs(bounding_box(mirrored).x1 - bounds.x1) < 1e-12);  // the same bounding box
  CHECK(rotated_box_iou(bar, mirrored) < 0.2);
  const GroundTruth truth = rotated_truth({bar});
  CHECK(voc_map(truth, {rotated_detection(1, 1, mirrored, 0.9)}) == 0.0);
  CHECK(voc_map(truth, {rotated_detection(1, 1, bar, 0.9)}) == doctest::Approx(1.0));
}

TEST_CASE("values/rotated_eval: duplicates and misses count as with axis-aligned boxes") {
  // Two bars in image 1, one in image 2; detections: bar 0 (tp), bar 0 again (fp), bar 2 (tp); bar 1 missed.
  // Precision 1, 1/2, 2/3 at recall 1/3, 1/3, 2/3: VOC AP = 1/3 * 1 + 1/3 * 2/3.
  const std::vector<RotatedBox> bars = {{20, 20, 30, 6, 0.5}, {40, 40, 30, 6, -0.5}, {30, 30, 30, 6, 1.0}};
  const GroundTruth truth = rotated_truth(bars, {}, {1, 1, 2});
  const std::vector<Detection> detections = {rotated_detection(1, 1, bars[0], 0.9),
                                             rotated_detection(1, 1, bars[0], 0.8),
                                             rotated_detection(2, 1, bars[2], 0.7)};
  CHECK(voc_map(truth, detections) == doctest::Approx(1.0 / 3 + 2.0 / 9));
  // COCO: 34 recall points (0 .. 0.33) at precision 1, 33 (0.34 .. 0.66) at 2/3, the rest 0.
  const CocoEvalResult coco = evaluate_coco(truth, detections);
  CHECK(coco.stats[0] == doctest::Approx((34 + 33 * 2.0 / 3) / 101));
  CHECK(coco.stats[8] == doctest::Approx(2.0 / 3));
}

TEST_CASE("values/rotated_eval: a rotated crowd region ignores the detections inside it") {
  // Object 1 is a regular bar, object 2 a long crowd region; the first detection lies wholly inside the
  // crowd (overlap exactly 1) and is ignored, so the curve has only the true positive.
  const RotatedBox bar{20, 20, 30, 6, 0.5}, crowd{60, 60, 60, 20, -0.4}, inside_crowd{62, 59, 20, 8, -0.4};
  const GroundTruth truth = rotated_truth({bar, crowd}, {false, true});
  const std::vector<Detection> detections = {rotated_detection(1, 1, inside_crowd, 0.95),
                                             rotated_detection(1, 1, bar, 0.9)};
  const VocResult voc = evaluate_voc(truth, detections);
  CHECK(voc.classes[0].num_ground_truth == 1);
  CHECK(voc.classes[0].precision.size() == 1);
  CHECK(voc.mean_average_precision == doctest::Approx(1.0));
  CHECK(evaluate_coco(truth, detections).stats[0] == doctest::Approx(1.0));
  // Moved off the crowd region, it is a false positive first: precision 1/2 at recall 1.
  std::vector<Detection> outside = detections;
  outside[0].rotated_box.cx = 10;
  outside[0].rotated_box.cy = 55;
  CHECK(voc_map(truth, outside) == doctest::Approx(0.5));
}

TEST_CASE("values/rotated_eval: COCO area ranges read the rotated area w * h") {
  // A 30 x 30 square at 45 degrees: area 900 (small, below 32^2) but a bounding box of 1800 (medium).
  const RotatedBox diamond{40, 40, 30, 30, kPi / 4};
  const GroundTruth truth = rotated_truth({diamond});
  const CocoEvalResult coco = evaluate_coco(truth, {rotated_detection(1, 1, diamond, 0.9)});
  CHECK(coco.stats[3] == doctest::Approx(1.0));  // AP small
  CHECK(coco.stats[4] == -1.0);                  // no medium object
  // An unmatched detection is ignored outside its range by its own w * h: 900, so it is a false positive
  // for "small" and left out of "medium", where (an object of 40 x 40 at 45 degrees, area 1600) it misses.
  const GroundTruth medium = rotated_truth({{40, 40, 40, 40, kPi / 4}}, {}, {2});
  const CocoEvalResult apart = evaluate_coco(medium, {rotated_detection(1, 1, diamond, 0.9)});
  CHECK(apart.stats[4] == doctest::Approx(0.0));  // AP medium: the object is missed
  CHECK(apart.precision_at(0, 0, 0, 1, 2) == -1.0);  // small: no object, so no AP at all
}

TEST_CASE("values/rotated_eval: axis-aligned detections against rotated ground truth are taken at angle 0") {
  const GroundTruth truth = rotated_truth({{50, 50, 40, 20, 0}});
  const std::vector<Detection> detections = {{1, 1, {30, 40, 70, 60}, 0.9}};  // the same region
  const VocResult voc = evaluate_voc(truth, detections);
  CHECK(voc.rotated_iou);
  CHECK(voc.mean_average_precision == doctest::Approx(1.0));
  CHECK(evaluate_coco(truth, detections).stats[0] == doctest::Approx(1.0));
}

TEST_CASE("values/rotated_eval: rotated detections switch axis-aligned ground truth to rotated IoU") {
  GroundTruth truth = rotated_truth({kSquare});
  truth.rotated = false;  // the square as an axis-aligned box: (0, 0, 100, 100)
  const std::vector<Detection> detections = {rotated_detection(1, 1, kTurned, 0.9)};
  const CocoEvalResult coco = evaluate_coco(truth, detections);
  CHECK(coco.rotated_iou);
  CHECK(coco.stats[1] == doctest::Approx(1.0));  // IoU 0.7071, not its bounding box's 0.5
  CHECK(coco.stats[2] == doctest::Approx(0.0));
  CHECK(format_voc(evaluate_voc(truth, detections)).find("(all-point, rotated IoU)") != std::string::npos);
}

TEST_CASE("values/rotated_eval: a rotated dataset's own boxes score 1, and its bounding boxes do not") {
  RotatedShapesOptions options;
  options.test_images = 10;
  const RotatedShapesDataset shapes(Split::kTest, options);
  const GroundTruth truth = ground_truth_from_dataset(shapes);
  CHECK(truth.rotated);
  std::vector<Detection> exact, bounds;
  for (const GroundTruthObject& object : truth.objects) {
    CHECK(object.area == object.rotated_box.w * object.rotated_box.h);
    CHECK(object.box == bounding_box(object.rotated_box));
    exact.push_back(rotated_detection(object.image_id, object.category_id, object.rotated_box, 0.5));
    bounds.push_back({object.image_id, object.category_id, object.box, 0.5});
  }
  REQUIRE(!exact.empty());
  CHECK(voc_map(truth, exact) == doctest::Approx(1.0));
  CHECK(evaluate_coco(truth, exact).stats[0] == doctest::Approx(1.0));
  CHECK(evaluate_coco(truth, bounds).stats[0] < 0.9);  // bounding boxes of turned shapes overlap them poorly
}

TEST_CASE("errors/rotated_eval: a non-finite rotated box is named") {
  GroundTruth truth = rotated_truth({kSquare});
  Detection broken = rotated_detection(1, 1, {50, 50, 10, 10, 0}, 0.9);
  broken.rotated_box.angle = NAN;  // its bounding box still finite
  CHECK_THROWS_CONTAINING(evaluate_voc(truth, {broken}), "evaluate_voc: detection 0 has a non-finite rotated box");
  CHECK_THROWS_CONTAINING(evaluate_voc(truth, {rotated_detection(1, 1, {50, 50, 10, 10, NAN}, 0.9)}),
                          "evaluate_voc: detection 0 has a non-finite box or score");
  truth.objects[0].rotated_box.w = INFINITY;
  CHECK_THROWS_CONTAINING(evaluate_coco(truth, {}), "evaluate_coco: ground-truth object 0 has a non-finite rotated box");
}
