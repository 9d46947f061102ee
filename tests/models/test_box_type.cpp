// BoxType: each step of the detector that depends on the box type calls the right op for either type.
#include <algorithm>
#include <cmath>

#include "core/factories.h"
#include "models/common/box_type.h"
#include "models/common/image_sizes.h"
#include "models/faster_rcnn/detector_config.h"
#include "models/rpn/rpn_loss.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"
#include "ops/boxes/box_geometry.h"
#include "ops/boxes/box_iou.h"
#include "ops/elementwise/binary.h"
#include "ops/nms/nms.h"
#include "ops/nms_rotated/nms_rotated.h"
#include "ops/shape/cat.h"
#include "tests/support.h"

using namespace minidet;
using models::BoxType;

TEST_CASE("values/box_type: each step calls the op of its box type") {
  const Tensor xyxy = from_vector<double>({0, 0, 10, 10, 5, 5, 15, 12, -3, 2, 40, 9}, {3, 4});
  const Tensor rotated = from_vector<double>({5, 5, 10, 10, 0.3, 10, 8, 10, 7, -1.2, 30, 5, 43, 7, 0.1}, {3, 5});
  CHECK(models::box_dim(BoxType::kAxisAligned) == 4);
  CHECK(models::box_dim(BoxType::kRotated) == 5);
  CHECK(models::box_type_of("t", xyxy) == BoxType::kAxisAligned);
  CHECK(models::box_type_of("t", rotated) == BoxType::kRotated);
  CHECK(models::box_type_of("t", zeros({2, 7, 5})) == BoxType::kRotated);

  CHECK(test::allclose(models::pairwise_iou(BoxType::kAxisAligned, xyxy, xyxy), box_iou(xyxy, xyxy), 0, 0));
  CHECK(test::allclose(models::pairwise_iou(BoxType::kRotated, rotated, rotated), box_iou_rotated(rotated, rotated), 0,
                       0));
  CHECK(models::box_sides(BoxType::kAxisAligned, xyxy).to_vector<double>() ==
        std::vector<double>{10, 10, 10, 7, 43, 7});
  CHECK(models::box_sides(BoxType::kRotated, rotated).to_vector<double>() == std::vector<double>{10, 10, 10, 7, 43, 7});
  CHECK(test::allclose(models::clip_to_image(BoxType::kAxisAligned, xyxy, 8, 12), clip_boxes_to_image(xyxy, 8, 12), 0,
                       0));
  CHECK(models::clip_to_image(BoxType::kRotated, rotated, 8, 12).to_vector<double>() == rotated.to_vector<double>());

  const Tensor scores = from_vector<double>({0.9, 0.8, 0.7}, {3});
  const Tensor classes = from_vector<int64_t>({1, 1, 2}, {3});
  CHECK(models::batched_nms(BoxType::kAxisAligned, xyxy, scores, classes, 0.1).to_vector<int64_t>() ==
        batched_nms(xyxy, scores, classes, 0.1).to_vector<int64_t>());
  CHECK(models::batched_nms(BoxType::kRotated, rotated, scores, classes, 0.1).to_vector<int64_t>() ==
        batched_nms_rotated(rotated, scores, classes, 0.1).to_vector<int64_t>());
  // The segmented mask of either type keeps what NMS per segment keeps.
  for (BoxType type : {BoxType::kAxisAligned, BoxType::kRotated}) {
    const Tensor& boxes = type == BoxType::kRotated ? rotated : xyxy;
    const std::vector<int64_t> kept =
        models::batched_nms(type, boxes, scores, zeros({3}, kInt64), 0.1).to_vector<int64_t>();
    const std::vector<uint8_t> mask =
        models::segmented_nms_mask(type, boxes, scores, 1, 0.1).keep_mask.to(kUInt8).to_vector<uint8_t>();
    for (int64_t i = 0; i < 3; ++i)
      CHECK((mask[i] != 0) == (std::find(kept.begin(), kept.end(), i) != kept.end()));
  }

  // The coder: BoxCoder's or RotatedBoxCoder's deltas with the angle weight last.
  const models::BoxTypeCoder axis(BoxType::kAxisAligned, {10, 10, 5, 5}), turned(BoxType::kRotated, {10, 10, 5, 5}, 2);
  const Tensor anchors = from_vector<double>({1, 1, 9, 12, 4, 6, 14, 10, -1, 3, 38, 8}, {3, 4});
  CHECK(test::allclose(axis.encode(xyxy, anchors), models::BoxCoder({10, 10, 5, 5}).encode(xyxy, anchors), 0, 0));
  const models::RotatedBoxCoder reference({10, 10, 5, 5, 2});
  const Tensor references = from_vector<double>({6, 4, 8, 11, 1.2, 9, 9, 12, 6, -0.2, 28, 6, 40, 6, 1.5}, {3, 5});
  CHECK(test::allclose(turned.encode(rotated, references), reference.encode(rotated, references), 0, 0));
  const Tensor deltas = turned.encode(rotated, references);
  CHECK(test::allclose(turned.decode(deltas, references), reference.decode(deltas, references), 0, 0));
}

TEST_CASE("values/box_type: bounding boxes of rotated boxes, and matching anchors by them") {
  constexpr double kPi = 3.14159265358979323846;
  // (cx, cy, w, h, a): at 0 the box itself; a quarter turn swaps the extents; at 45 degrees a 20 x 4 bar
  // reaches (20 + 4) / 2 / sqrt(2) each way; the padding row gives the empty box.
  const Tensor rotated = from_vector<double>({10, 20, 8, 4, 0, 10, 20, 8, 4, kPi / 2, 0, 0, 20, 4, kPi / 4, 0, 0, 0, 0, 0},
                                             {4, 5});
  const double e = 12.0 / std::sqrt(2.0);
  const std::vector<double> expected = {6, 18, 14, 22, 8, 16, 12, 24, -e, -e, e, e, 0, 0, 0, 0};
  const std::vector<double> got = models::bounding_boxes(BoxType::kRotated, rotated).to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-12));
  const Tensor xyxy = from_vector<double>({0, 0, 10, 10}, {1, 4});
  CHECK(models::bounding_boxes(BoxType::kAxisAligned, xyxy).to_vector<double>() == xyxy.to_vector<double>());

  // A 40 x 4 bar at 45 degrees and horizontal anchors: by rotated IoU no anchor passes 0.7 (the bar keeps only
  // its one best anchor, a low-quality match); by bounding boxes the anchor that is its bounding box (and the
  // one like it) is a full positive, and the regression still aims at the rotated bar.
  const double side = 44.0 / std::sqrt(2.0);
  const Tensor bar = from_vector<double>({50, 50, 40, 4, kPi / 4}, {1, 5});
  const Tensor anchors = from_vector<double>({50, 50, side, side, 0, 51, 50, side, side, 0, 50, 50, 40, 4, 0,
                                              10, 10, 8, 8, 0},
                                             {4, 5});
  models::RPNLossOptions options;
  const models::RPNTargets by_rotated_iou = models::rpn_targets(anchors, {bar}, options);
  options.match_bounding_boxes = true;
  const models::RPNTargets by_bounding_box = models::rpn_targets(anchors, {bar}, options);
  const std::vector<int64_t> rotated_labels = by_rotated_iou.labels.to_vector<int64_t>();
  const std::vector<int64_t> box_labels = by_bounding_box.labels.to_vector<int64_t>();
  CHECK(std::count(rotated_labels.begin(), rotated_labels.end(), 1) == 1);  // the low-quality match alone
  CHECK(box_labels == std::vector<int64_t>{1, 1, 0, 0});  // bounding-box IoU 1, 0.96; 0.3 > IoU of the others
  // Anchor 0's target: from a square at angle 0 to the bar, the delta to the rotated box (not to its bounding box).
  const std::vector<double> target = by_bounding_box.regression.to_vector<double>();
  CHECK(target[4] == doctest::Approx(kPi / 4));
  CHECK(target[2] == doctest::Approx(std::log(40.0 / side)));
}

TEST_CASE("values/box_type: several images' rows, each clipped to its own image") {
  // Four images of two sizes in the runs A A B A, with 2, 0, 3 and 1 rows: every row must come out as
  // clip_to_image with its own image's size, the empty image included.
  Generator g(5);
  const Tensor corner = sub(mul(rand({6, 2}, kFloat64, &g), 60.0), 10.0);
  const Tensor boxes = cat({corner, add(corner, mul(rand({6, 2}, kFloat64, &g), 30.0))}, 1);  // (6, 4)
  const models::ImageSizes sizes = {{20, 30}, {20, 30}, {40, 25}, {20, 30}};
  const std::vector<int64_t> rows = {2, 0, 3, 1};
  const Tensor clipped = models::clip_to_images(BoxType::kAxisAligned, boxes, sizes, rows);
  REQUIRE(clipped.sizes() == Shape({6, 4}));
  for (int64_t n = 0, start = 0; n < 4; start += rows[n], ++n) {
    CAPTURE(n);
    const Tensor own = boxes.narrow(0, start, rows[n]);
    CHECK(test::allclose(clipped.narrow(0, start, rows[n]),
                         models::clip_to_image(BoxType::kAxisAligned, own, sizes[n][0], sizes[n][1]), 0, 0));
  }
  CHECK(!test::allclose(clipped, boxes, 0, 0));  // some boxes were clipped: the test sees the sizes
  // (R, C, D) rows, as the box head's per-class boxes: the same per row.
  const Tensor per_class = stack({boxes, add(boxes, 5.0)}, 1);  // (6, 2, 4)
  const Tensor clipped_per_class = models::clip_to_images(BoxType::kAxisAligned, per_class, sizes, rows);
  CHECK(test::allclose(clipped_per_class.select(1, 0), clipped, 0, 0));
  // Rotated boxes are never clipped.
  const Tensor rotated = cat({boxes, zeros({6, 1}, kFloat64)}, 1);
  CHECK(test::allclose(models::clip_to_images(BoxType::kRotated, rotated, sizes, rows), rotated, 0, 0));
}

TEST_CASE("errors/box_type: clip_to_images names what does not add up") {
  const Tensor boxes = zeros({3, 4}, kFloat64);
  CHECK_THROWS_CONTAINING(models::clip_to_images(BoxType::kAxisAligned, boxes, {{5, 5}}, {1, 2}),
                          "clip_to_images: expected one image size per image (2), got 1");
  CHECK_THROWS_CONTAINING(models::clip_to_images(BoxType::kAxisAligned, boxes, {{5, 5}, {6, 6}}, {1, 1}),
                          "clip_to_images: expected 2 rows (the images' rows summed), got boxes of shape (3, 4)");
}

TEST_CASE("errors/box_type: widths other than 4 and 5 are named") {
  CHECK_THROWS_CONTAINING(models::box_type_of("op", zeros({3, 6})),
                          "op: expected boxes with 4 columns (x1, y1, x2, y2) or 5 (cx, cy, w, h, angle), got (3, 6)");
  CHECK_THROWS_CONTAINING(models::box_type_of("op", Tensor(), "anchors"), "op: expected anchors with 4 columns");
}

TEST_CASE("values/detector_config: box_type rotated reaches the RPN and the RoI heads") {
  models::DetectorConfig config;
  config.set("box_type=rotated");
  config.set("rpn.anchor_angles_degrees=[0, 45, 90]");
  CHECK(config.box_type == BoxType::kRotated);
  const models::DetectorConfig r = config.resolved();
  CHECK(r.rpn.box_type == BoxType::kRotated);
  CHECK(r.roi_heads.box_type == BoxType::kRotated);
  CHECK(models::DetectorConfig::from_json(config.to_json()).to_json() == config.to_json());
  CHECK(config.to_json().find("\"box_type\": \"rotated\"") != std::string::npos);
  CHECK_THROWS_CONTAINING(config.set("box_type=oriented"), "box_type");
  config.rpn.anchor_angles_degrees = {0, std::nan("")};
  CHECK_THROWS_CONTAINING(config.validate(), "rpn.anchor_angles_degrees must be finite");
}
