// The engine's evaluation plumbing (engine/evaluation.h) with rotated boxes: the model's (D, 5) rows as
// rotated detections, packing for the gather between ranks, scoring a rotated dataset with rotated IoU, and
// the pictures. Axis-aligned runs keep their numbers (the trainer's and the CLI's tests pin them).
#include <cmath>
#include <filesystem>

#include "core/factories.h"
#include "data/image/image_io.h"
#include "data/shapes/rotated_shapes_dataset.h"
#include "engine/evaluation.h"
#include "tests/data/temp_dir.h"
#include "tests/models/tiny_detector.h"
#include "tests/support.h"

using namespace minidet;

namespace {

constexpr double kPi = 3.14159265358979323846;

data::RotatedShapesDataset tiny_rotated_shapes(int64_t images) {
  data::RotatedShapesOptions o;
  o.image_width = o.image_height = 32;
  o.num_classes = 2;
  o.max_objects = 2;
  o.test_images = images;
  return data::RotatedShapesDataset(data::Split::kTest, o);
}

}  // namespace

TEST_CASE("values/engine_evaluation: (D, 5) rows become rotated detections and (D, 4) rows boxes") {
  models::Detections rotated{from_vector<float>({10, 12, 8, 4, 0.5f, 20, 20, 6, 6, -1.5707964f}, {2, 5}),
                             from_vector<float>({0.9f, 0.4f}, {2}), from_vector<int64_t>({2, 1}, {2})};
  const auto category_of = [](int64_t label) { return 10 * label; };
  const std::vector<data::Detection> found = engine::detections_of(rotated, 7, category_of);
  REQUIRE(found.size() == 2);
  CHECK(found[0].rotated);
  CHECK(found[0].image_id == 7);
  CHECK(found[0].category_id == 20);
  CHECK(found[0].score == doctest::Approx(0.9));
  CHECK(found[0].rotated_box == data::RotatedBox{10, 12, 8, 4, static_cast<double>(0.5f)});
  CHECK(found[0].box == data::bounding_box(found[0].rotated_box));
  // float32's -pi/2 lies just below the double -pi/2: normalised, it is the same box at about +pi/2.
  CHECK(found[1].rotated_box.angle < kPi / 2);
  CHECK(found[1].rotated_box.angle > kPi / 2 - 1e-6);

  models::Detections boxes{from_vector<float>({1, 2, 3, 4}, {1, 4}), from_vector<float>({0.5f}, {1}),
                           from_vector<int64_t>({1}, {1})};
  const std::vector<data::Detection> plain = engine::detections_of(boxes, 3, category_of);
  REQUIRE(plain.size() == 1);
  CHECK_FALSE(plain[0].rotated);
  CHECK(plain[0].box == data::Box{1, 2, 3, 4});
  CHECK(plain[0].category_id == 10);
}

TEST_CASE("values/engine_evaluation: packing keeps axis-aligned and rotated detections exactly") {
  const std::vector<data::Detection> detections = {
      {3, 1, {1.5, 2.25, 10, 12.125}, 0.75},
      data::rotated_detection(4, 2, {20.5, 10.25, 12, 3.5, -1.2345678901234567}, 0.5),
      data::rotated_detection(123456789, 90, {1e4, 2e4, 0.001, 300, 1.5}, 1e-7)};
  const std::vector<double> packed = engine::pack_detections(detections);
  CHECK(packed.size() == detections.size() * engine::kPackedDetection);
  const std::vector<data::Detection> unpacked = engine::unpack_detections(packed);
  REQUIRE(unpacked.size() == detections.size());
  for (size_t i = 0; i < detections.size(); ++i) {
    CHECK(unpacked[i].image_id == detections[i].image_id);
    CHECK(unpacked[i].category_id == detections[i].category_id);
    CHECK(unpacked[i].score == detections[i].score);
    CHECK(unpacked[i].box == detections[i].box);
    CHECK(unpacked[i].rotated == detections[i].rotated);
    CHECK(unpacked[i].rotated_box == detections[i].rotated_box);
  }
}

TEST_CASE("values/engine_evaluation: a rotated dataset is scored with rotated IoU") {
  const data::RotatedShapesDataset shapes = tiny_rotated_shapes(6);
  std::vector<data::Detection> exact;
  for (int64_t i = 0; i < shapes.size(); ++i) {
    const data::Target target = shapes.target(i);
    for (size_t k = 0; k < target.labels.size(); ++k)
      exact.push_back(data::rotated_detection(target.image_id, shapes.category_id(target.labels[k]),
                                              target.rotated_boxes[k], 0.9));
  }
  REQUIRE(!exact.empty());
  const engine::Scores scores = engine::score(shapes, exact);
  CHECK(scores.map50 == doctest::Approx(1.0));
  CHECK(scores.coco[0] == doctest::Approx(1.0));
  CHECK(scores.table.find("rotated IoU") != std::string::npos);
  // The same objects as their bounding boxes at angle 0 overlap the turned shapes less.
  std::vector<data::Detection> bounds;
  for (const data::Detection& d : exact) bounds.push_back({d.image_id, d.category_id, d.box, d.score});
  CHECK(engine::score(shapes, bounds).coco[0] < 0.9);
}

TEST_CASE("values/engine_evaluation: predict of a rotated detector gives rotated detections") {
  models::DetectorConfig config = test::tiny_detector_config();
  config.box_type = models::BoxType::kRotated;
  config.rpn.anchor_angles_degrees = {-45, 0, 45};
  config.roi_heads.score_threshold = 0.0;  // untrained: keep whatever it finds
  Generator generator(3);
  models::FasterRCNN model(config, &generator);
  const data::RotatedShapesDataset shapes = tiny_rotated_shapes(3);
  const std::vector<data::Detection> found = engine::predict(model, shapes, 2);
  REQUIRE(!found.empty());
  for (const data::Detection& d : found) {
    CHECK(d.rotated);
    CHECK(d.box == data::bounding_box(d.rotated_box));
    CHECK(d.rotated_box.angle >= -kPi / 2);
    CHECK(d.rotated_box.angle < kPi / 2);
  }
  const engine::Scores scores = engine::score(shapes, found);  // runs; an untrained model scores low
  CHECK(scores.map50 >= 0.0);
}

TEST_CASE("values/engine_evaluation: draw_examples outlines rotated ground truth and predictions") {
  const data::RotatedShapesDataset shapes = tiny_rotated_shapes(2);
  const data::Target target = shapes.target(0);
  REQUIRE(!target.rotated_boxes.empty());
  const data::RotatedBox turned = target.rotated_boxes[0];
  const std::vector<data::Detection> detections = {data::rotated_detection(target.image_id, 1, turned, 0.9)};
  const data::LabelledBoxes drawn = engine::predictions_of(shapes, target.image_id, detections);
  REQUIRE(drawn.rotated_boxes.size() == 1);
  CHECK(drawn.rotated_boxes[0] == turned);
  CHECK(drawn.boxes[0] == data::bounding_box(turned));
  test::TempDir dir;
  const std::vector<std::string> written = engine::draw_examples(shapes, detections, 2, dir.file("drawn"));
  REQUIRE(written.size() == 2);
  for (const std::string& path : written) CHECK(std::filesystem::is_regular_file(path));
  CHECK(data::read_image(written[0]).width == 256);  // 32 pixels zoomed 8 times
}

TEST_CASE("errors/engine_evaluation: a partial packed row and boxes of another width are refused") {
  CHECK_THROWS_CONTAINING(engine::unpack_detections(std::vector<double>(10, 0.0)),
                          "unpack_detections: 10 numbers are not a whole number of detections of 9");
  models::Detections odd{zeros({1, 3}), zeros({1}), zeros({1}, kInt64)};
  CHECK_THROWS_CONTAINING(engine::detections_of(odd, 1, [](int64_t label) { return label; }),
                          "detections_of: boxes must be (D, 4) or (D, 5), got");
}
