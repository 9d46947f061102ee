// Evaluation on hand-built cases whose AP is known by hand (the numbers are worked out in the comments).
#include <cmath>

#include "data/eval/coco_eval.h"
#include "data/eval/voc_eval.h"
#include "tests/support.h"

using namespace minidet::data;

namespace {

// Two categories (1 "square", 2 "circle") and three images (1, 2, 3) unless a case changes them.
GroundTruth make_truth(std::vector<GroundTruthObject> objects) {
  GroundTruth truth;
  truth.image_ids = {1, 2, 3};
  truth.category_ids = {1, 2};
  truth.category_names = {"square", "circle"};
  int64_t id = 1;
  for (GroundTruthObject& object : objects) {
    object.id = id++;
    if (object.area == 0) object.area = object.box.area();
  }
  truth.objects = std::move(objects);
  return truth;
}

GroundTruthObject object(int64_t image, int64_t category, Box box, bool crowd = false) {
  GroundTruthObject o;
  o.image_id = image;
  o.category_id = category;
  o.box = box;
  o.iscrowd = crowd;
  return o;
}

Detection detection(int64_t image, int64_t category, Box box, double score) { return {image, category, box, score}; }

// Large boxes (area > 96²), so every area range but "large" and "all" is empty.
const Box kA{0, 0, 100, 100};
const Box kB{200, 200, 300, 300};

}  // namespace

TEST_CASE("values/evaluation: perfect detections score 1") {
  const GroundTruth truth = make_truth({object(1, 1, kA), object(2, 1, kB), object(2, 2, kA)});
  const std::vector<Detection> detections = {detection(1, 1, kA, 0.9), detection(2, 1, kB, 0.8),
                                             detection(2, 2, kA, 0.7)};
  const CocoEvalResult coco = evaluate_coco(truth, detections);
  for (int i : {0, 1, 2, 5, 8, 11}) CHECK(coco.stats[i] == doctest::Approx(1.0));
  for (int i : {3, 4, 9, 10}) CHECK(coco.stats[i] == -1.0);  // no small or medium objects at all
  CHECK(evaluate_voc(truth, detections).mean_average_precision == doctest::Approx(1.0));
  CHECK(evaluate_voc(truth, detections, {0.5, true}).mean_average_precision == doctest::Approx(1.0));
}

TEST_CASE("values/evaluation: one missed object halves recall") {
  const GroundTruth truth = make_truth({object(1, 1, kA), object(2, 1, kB)});
  const std::vector<Detection> detections = {detection(1, 1, kA, 0.9)};
  // Precision 1 up to recall 0.5 and nothing after: VOC AP = 0.5; COCO reads precision 1 at the 51 recall
  // points 0.00..0.50 and 0 at the other 50.
  const VocResult voc = evaluate_voc(truth, detections);
  CHECK(voc.classes[0].average_precision == doctest::Approx(0.5));
  CHECK(voc.classes[1].average_precision == -1.0);  // "circle" has no objects
  CHECK(voc.mean_average_precision == doctest::Approx(0.5));
  CHECK(evaluate_voc(truth, detections, {0.5, true}).mean_average_precision == doctest::Approx(6.0 / 11));
  const CocoEvalResult coco = evaluate_coco(truth, detections);
  CHECK(coco.stats[0] == doctest::Approx(51.0 / 101));
  CHECK(coco.stats[8] == doctest::Approx(0.5));
}

TEST_CASE("values/evaluation: duplicate detection counts as false positive") {
  const GroundTruth truth = make_truth({object(1, 1, kA), object(1, 1, kB)});
  // A (tp), A again (fp), B (tp): precision 1, 1/2, 2/3 at recall 1/2, 1/2, 1.
  const std::vector<Detection> detections = {detection(1, 1, kA, 0.9), detection(1, 1, kA, 0.8),
                                             detection(1, 1, kB, 0.7)};
  // VOC: 0.5 * 1 + 0.5 * 2/3. COCO: 51 points at precision 1 and 50 at 2/3.
  CHECK(evaluate_voc(truth, detections).mean_average_precision == doctest::Approx(0.5 + 0.5 * 2.0 / 3));
  const CocoEvalResult coco = evaluate_coco(truth, detections);
  CHECK(coco.stats[0] == doctest::Approx((51 + 50 * 2.0 / 3) / 101));
  CHECK(coco.stats[8] == doctest::Approx(1.0));
  CHECK(coco.stats[6] == doctest::Approx(0.5));  // AR@1: one detection per image finds one of two objects
}

TEST_CASE("values/evaluation: score ordering decides the curve") {
  const GroundTruth truth = make_truth({object(1, 1, kA), object(2, 1, kB)});
  const Box nowhere{400, 400, 500, 500};
  const std::vector<Detection> false_first = {detection(3, 1, nowhere, 0.9), detection(1, 1, kA, 0.8),
                                              detection(2, 1, kB, 0.7)};
  const std::vector<Detection> false_last = {detection(3, 1, nowhere, 0.1), detection(1, 1, kA, 0.8),
                                             detection(2, 1, kB, 0.7)};
  // False positive first: precision 0, 1/2, 2/3, whose envelope is 2/3 everywhere.
  CHECK(evaluate_voc(truth, false_first).mean_average_precision == doctest::Approx(2.0 / 3));
  CHECK(evaluate_coco(truth, false_first).stats[0] == doctest::Approx(2.0 / 3));
  // Last: it comes after full recall and costs nothing.
  CHECK(evaluate_voc(truth, false_last).mean_average_precision == doctest::Approx(1.0));
  CHECK(evaluate_coco(truth, false_last).stats[0] == doctest::Approx(1.0));
  // Equal scores keep input order (stable sorts), so listing the false positive first still costs. (COCO
  // pools images in increasing id order, so the tie is within one image here.)
  const std::vector<Detection> tied = {detection(1, 1, nowhere, 0.5), detection(1, 1, kA, 0.5),
                                       detection(2, 1, kB, 0.5)};
  CHECK(evaluate_voc(truth, tied).mean_average_precision == doctest::Approx(2.0 / 3));
  CHECK(evaluate_coco(truth, tied).stats[0] == doctest::Approx(2.0 / 3));
}

TEST_CASE("values/evaluation: a crowd region ignores the detections on it") {
  const Box crowd{0, 0, 300, 300};
  const Box inside_crowd{150, 150, 250, 250};  // IoU with the crowd box 1/9, but wholly covered by it
  const Box object_box{0, 0, 100, 100};
  const GroundTruth truth = make_truth({object(1, 1, object_box), object(1, 1, crowd, true)});
  const std::vector<Detection> detections = {detection(1, 1, inside_crowd, 0.95), detection(1, 1, object_box, 0.9)};
  // Ignored, not false: AP stays 1, and the crowd region is not an object to find.
  CHECK(evaluate_voc(truth, detections).classes[0].num_ground_truth == 1);
  CHECK(evaluate_voc(truth, detections).mean_average_precision == doctest::Approx(1.0));
  CHECK(evaluate_coco(truth, detections).stats[0] == doctest::Approx(1.0));
  // The same region as a regular object: two objects to find, and the first detection is a false positive
  // (IoU 1/9): precision 0 then 1/2 at recall 1/2, so VOC AP = 1/2 * 1/2 and COCO reads 1/2 at 51 points.
  const GroundTruth not_crowd = make_truth({object(1, 1, object_box), object(1, 1, crowd)});
  CHECK(evaluate_voc(not_crowd, detections).mean_average_precision == doctest::Approx(0.25));
  CHECK(evaluate_coco(not_crowd, detections).stats[1] == doctest::Approx(51 * 0.5 / 101));
}

TEST_CASE("values/evaluation: empty images count only their false positives") {
  const GroundTruth truth = make_truth({object(1, 1, kA)});  // images 2 and 3 are empty
  CHECK(evaluate_coco(truth, {detection(1, 1, kA, 0.9)}).stats[0] == doctest::Approx(1.0));
  // A confident detection on an empty image: precision 0 then 1/2, envelope 1/2.
  const std::vector<Detection> with_false = {detection(1, 1, kA, 0.5), detection(2, 1, kB, 0.9)};
  CHECK(evaluate_voc(truth, with_false).mean_average_precision == doctest::Approx(0.5));
  CHECK(evaluate_coco(truth, with_false).stats[0] == doctest::Approx(0.5));
  // Nothing anywhere: every number is undefined (-1), never NaN.
  const CocoEvalResult nothing = evaluate_coco(make_truth({}), {});
  for (double value : nothing.stats) CHECK(value == -1.0);
  CHECK(evaluate_voc(make_truth({}), {}).mean_average_precision == -1.0);
}

TEST_CASE("values/evaluation: a category with no ground truth is left out of the mean") {
  const GroundTruth truth = make_truth({object(1, 1, kA)});
  // Category 2 has only a (necessarily false) detection: its AP is -1 and does not pull the mean down.
  const std::vector<Detection> detections = {detection(1, 1, kA, 0.9), detection(1, 2, kB, 0.99)};
  const VocResult voc = evaluate_voc(truth, detections);
  CHECK(voc.classes[1].average_precision == -1.0);
  CHECK(voc.mean_average_precision == doctest::Approx(1.0));
  const CocoEvalResult coco = evaluate_coco(truth, detections);
  CHECK(coco.category_ap(1) == -1.0);
  CHECK(coco.stats[0] == doctest::Approx(1.0));
}

TEST_CASE("values/evaluation: IoU thresholds grade a loose box") {
  // IoU 0.62 passes the thresholds 0.50, 0.55 and 0.60 only: AP = 3/10, AP50 = 1, AP75 = 0.
  const GroundTruth truth = make_truth({object(1, 1, kA)});
  const std::vector<Detection> detections = {detection(1, 1, {0, 0, 100, 62}, 0.9)};
  const CocoEvalResult coco = evaluate_coco(truth, detections);
  CHECK(coco.stats[0] == doctest::Approx(0.3));
  CHECK(coco.stats[1] == doctest::Approx(1.0));
  CHECK(coco.stats[2] == doctest::Approx(0.0));
  CHECK(evaluate_voc(truth, detections).mean_average_precision == doctest::Approx(1.0));
  CHECK(evaluate_voc(truth, detections, {0.7, false}).mean_average_precision == doctest::Approx(0.0));
}

TEST_CASE("values/evaluation: area ranges split small medium and large") {
  const Box small{0, 0, 20, 20}, medium{100, 100, 150, 150}, large{200, 200, 320, 320};
  const GroundTruth truth = make_truth({object(1, 1, small), object(1, 1, medium), object(1, 1, large)});
  // The medium object is missed. Small and large are perfect in their own ranges; "all" has recall 2/3.
  const std::vector<Detection> detections = {detection(1, 1, small, 0.9), detection(1, 1, large, 0.8)};
  const CocoEvalResult coco = evaluate_coco(truth, detections);
  CHECK(coco.stats[3] == doctest::Approx(1.0));
  CHECK(coco.stats[4] == doctest::Approx(0.0));
  CHECK(coco.stats[5] == doctest::Approx(1.0));
  CHECK(coco.stats[8] == doctest::Approx(2.0 / 3));
  CHECK(coco.stats[0] == doctest::Approx(67.0 / 101));  // precision 1 for the recall points 0.00..0.66
}

TEST_CASE("values/evaluation: voc average precision by both rules") {
  // Precision 1, 1/2, 2/3 at recall 1/3, 1/3, 2/3: the envelope is 1 to 1/3 and 2/3 to 2/3.
  const std::vector<double> recall = {1.0 / 3, 1.0 / 3, 2.0 / 3}, precision = {1, 0.5, 2.0 / 3};
  CHECK(voc_average_precision(recall, precision, false) == doctest::Approx(1.0 / 3 + 1.0 / 3 * 2.0 / 3));
  // 11-point: t = 0, .1, .2, .3 -> 1; t = .4, .5, .6 -> 2/3; t = .7 ... 1 -> 0.
  CHECK(voc_average_precision(recall, precision, true) == doctest::Approx((4 + 3 * 2.0 / 3) / 11));
  CHECK(voc_average_precision({}, {}, false) == 0.0);
}

TEST_CASE("values/evaluation: coco summary prints the standard lines") {
  const GroundTruth truth = make_truth({object(1, 1, kA)});
  const std::string summary = format_coco_summary(evaluate_coco(truth, {detection(1, 1, kA, 0.9)}));
  CHECK(summary.find(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000\n") == 0);
  CHECK(summary.find(" Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 1.000") !=
        std::string::npos);
  CHECK(summary.find(" Average Recall     (AR) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = -1.000") !=
        std::string::npos);
  CHECK(summary.find(" Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 1.000") !=
        std::string::npos);
}

TEST_CASE("errors/evaluation: detections must name known images and categories") {
  const GroundTruth truth = make_truth({object(1, 1, kA)});
  CHECK_THROWS_CONTAINING(evaluate_coco(truth, {detection(9, 1, kA, 0.5)}), "image_id 9");
  CHECK_THROWS_CONTAINING(evaluate_voc(truth, {detection(1, 7, kA, 0.5)}), "category_id 7");
  CHECK_THROWS_CONTAINING(evaluate_coco(truth, {detection(1, 1, kA, NAN)}), "non-finite");
}
