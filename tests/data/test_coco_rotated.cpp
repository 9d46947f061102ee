// COCO files with rotated boxes (detectron2's XYWHA bbox [cx, cy, w, h, angle in degrees], coco_format.h):
// export and re-import of the rotated shapes, results files, degrees in the file, no clipping, and the
// refusals (mixed kinds, wrong length, non-finite, w or h <= 0).
#include <cmath>
#include <fstream>
#include <sstream>

#include "data/coco/coco_dataset.h"
#include "data/coco/coco_format.h"
#include "data/shapes/rotated_shapes_dataset.h"
#include "tests/data/temp_dir.h"
#include "tests/support.h"

using namespace minidet::data;
using minidet::test::TempDir;

namespace {

constexpr double kPi = 3.14159265358979323846;

RotatedShapesDataset small_rotated_shapes() {
  RotatedShapesOptions options;
  options.test_images = 8;
  return RotatedShapesDataset(Split::kTest, options);
}

// Two rotated boxes are the same description up to the file's degrees: centre and sides equal, angles equal
// modulo pi (an angle within an ulp of -pi/2 may come back near +pi/2, coco_bbox.h) within 1e-12.
void check_same_rotated(const RotatedBox& read, const RotatedBox& written) {
  CHECK(read.cx == written.cx);
  CHECK(read.cy == written.cy);
  CHECK(read.w == written.w);
  CHECK(read.h == written.h);
  CHECK(std::abs(std::remainder(read.angle - written.angle, kPi)) < 1e-12);
  CHECK(read.angle >= -kPi / 2);
  CHECK(read.angle < kPi / 2);
}

// A two-image file (32 x 32) whose annotations the cases fill in.
std::string rotated_json(const std::string& annotations) {
  return R"({"images": [{"id": 1, "file_name": "a.png", "width": 32, "height": 32},
                       {"id": 2, "file_name": "b.png", "width": 32, "height": 32}],
             "categories": [{"id": 1, "name": "bar"}],
             "annotations": [)" + annotations + "]}";
}

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("values/coco_rotated: export and re-import give the rotated boxes back") {
  const RotatedShapesDataset shapes = small_rotated_shapes();
  const CocoInstances expected = coco_instances_from_dataset(shapes);
  CHECK(expected.rotated);
  TempDir dir;
  export_coco(shapes, dir.file("rotated.json"), dir.file("images"));
  const CocoInstances read = read_coco_instances(dir.file("rotated.json"));
  CHECK(read.rotated);
  CHECK(read.clipped_boxes == 0);
  REQUIRE(read.annotations.size() == expected.annotations.size());
  REQUIRE(!read.annotations.empty());
  for (size_t i = 0; i < read.annotations.size(); ++i) {
    const CocoAnnotation &a = read.annotations[i], &b = expected.annotations[i];
    CHECK(a.rotated);
    check_same_rotated(a.rotated_box, b.rotated_box);
    CHECK(a.area == b.rotated_box.w * b.rotated_box.h);  // area = w * h, not the bounding box's
    CHECK(a.box == bounding_box(a.rotated_box));
    CHECK(std::abs(a.box.x1 - b.box.x1) < 1e-9);
  }

  const CocoDataset coco(dir.file("rotated.json"), dir.file("images"));
  CHECK(coco.rotated());
  for (int64_t index = 0; index < shapes.size(); ++index) {
    const Sample original = shapes.get(index), reread = coco.get(index);
    CHECK(reread.labels == original.labels);
    REQUIRE(reread.rotated_boxes.size() == original.rotated_boxes.size());
    REQUIRE(reread.boxes.size() == original.boxes.size());
    for (size_t i = 0; i < reread.rotated_boxes.size(); ++i) {
      check_same_rotated(reread.rotated_boxes[i], original.rotated_boxes[i]);
      CHECK(reread.boxes[i] == bounding_box(reread.rotated_boxes[i]));
    }
  }
}

TEST_CASE("values/coco_rotated: the file holds degrees counter-clockwise, read back as radians") {
  TempDir dir;
  const RotatedBox turned{10.5, 12, 8, 3, kPi / 6};  // 30 degrees
  write_coco_results({rotated_detection(1, 1, turned, 0.75), rotated_detection(2, 1, {4, 5, 2, 1, -kPi / 2}, 0.5)},
                     dir.file("results.json"));
  const std::string text = read_text(dir.file("results.json"));
  CHECK(text.find("[10.5,12.0,8.0,3.0,29.999999999999996]") != std::string::npos);  // pi/6 * 180/pi
  CHECK(text.find("[4.0,5.0,2.0,1.0,-90.0]") != std::string::npos);

  const CocoInstances truth = read_coco_instances(dir.write("gt.json", rotated_json("")));
  const std::vector<Detection> read = read_coco_results(dir.file("results.json"), &truth);
  REQUIRE(read.size() == 2);
  CHECK(read[0].rotated);
  check_same_rotated(read[0].rotated_box, turned);
  CHECK(read[0].box == bounding_box(read[0].rotated_box));
  CHECK(read[0].score == 0.75);
  CHECK(read[1].rotated_box.angle == -kPi / 2);  // -90 degrees is exactly the start of the range

  // 90 and 270 degrees are -90 (the same box turned by pi), 180 is 0.
  const CocoInstances wrapped = read_coco_instances(dir.write("wrapped.json", rotated_json(
      R"({"id": 1, "image_id": 1, "category_id": 1, "bbox": [16, 16, 8, 4, 90]},
         {"id": 2, "image_id": 1, "category_id": 1, "bbox": [16, 16, 8, 4, 270]},
         {"id": 3, "image_id": 1, "category_id": 1, "bbox": [16, 16, 8, 4, 180]})")));
  CHECK(wrapped.annotations[0].rotated_box.angle == doctest::Approx(-kPi / 2).epsilon(1e-15));
  CHECK(wrapped.annotations[1].rotated_box.angle == doctest::Approx(-kPi / 2).epsilon(1e-15));
  CHECK(std::abs(wrapped.annotations[2].rotated_box.angle) < 1e-15);
  CHECK(wrapped.annotations[0].area == 32);  // missing area: w * h
}

TEST_CASE("values/coco_rotated: results files round trip rotated detections") {
  TempDir dir;
  const std::vector<Detection> detections = {rotated_detection(1, 1, {3.25, 7.5, 12, 2.5, 1.2345}, 0.875),
                                             rotated_detection(2, 1, {20, 21, 5, 6, -0.7}, 0.125)};
  write_coco_results(detections, dir.file("results.json"));
  const std::vector<Detection> read = read_coco_results(dir.file("results.json"));
  REQUIRE(read.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(read[i].image_id == detections[i].image_id);
    CHECK(read[i].category_id == detections[i].category_id);
    CHECK(read[i].score == detections[i].score);
    CHECK(read[i].rotated);
    check_same_rotated(read[i].rotated_box, detections[i].rotated_box);
  }
}

TEST_CASE("values/coco_rotated: rotated boxes reaching outside the image are kept as they are") {
  TempDir dir;
  const CocoInstances instances = read_coco_instances(dir.write("x.json", rotated_json(
      R"({"id": 1, "image_id": 1, "category_id": 1, "bbox": [2, 30, 20, 6, 30], "area": 120})")));
  CHECK(instances.clipped_boxes == 0);
  const CocoAnnotation& annotation = instances.annotations[0];
  CHECK(annotation.rotated_box.cx == 2);
  CHECK(annotation.rotated_box.w == 20);
  CHECK(annotation.box == bounding_box(annotation.rotated_box));
  CHECK(annotation.box.x1 < 0);   // not clipped
  CHECK(annotation.box.y2 > 32);
  const GroundTruth truth = ground_truth_from_coco(instances);
  CHECK(truth.rotated);
  CHECK(truth.objects[0].rotated_box == annotation.rotated_box);
  CHECK(truth.objects[0].area == 120);
}

TEST_CASE("errors/coco_rotated: mixed kinds, wrong lengths, non-finite and empty boxes name the entry") {
  TempDir dir;
  auto read_with = [&](const std::string& annotations) {
    return read_coco_instances(dir.write("x.json", rotated_json(annotations)));
  };
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 7, "image_id": 1, "category_id": 1, "bbox": [16, 16, 8, 4, 10]},
                                       {"id": 9, "image_id": 2, "category_id": 1, "bbox": [1, 1, 8, 4]})"),
                          "annotations[1] (id 9) in " + dir.file("x.json") + ": bbox has 4 numbers, a box [x, y, w, "
                          "h], but annotations[0] (id 7) has 5 numbers, a rotated box [cx, cy, w, h, angle in "
                          "degrees]: a file holds one kind of box");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 3, "image_id": 1, "category_id": 1, "bbox": [16, 16, 8, 4, 10, 2]})"),
                          "annotations[0] (id 3) in " + dir.file("x.json") + ": bbox must have 4 numbers [x, y, w, h] "
                          "or 5 numbers [cx, cy, w, h, angle in degrees]");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 3, "image_id": 1, "category_id": 1, "bbox": [16, 16, 8, 4, "10"]})"),
                          "bbox must have 4 numbers");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 3, "image_id": 1, "category_id": 1, "bbox": [16, 16, 0, 4, 10]})"),
                          "rotated bbox [cx, cy, w, h, angle] needs w > 0 and h > 0, got [16,16,0,4,10]");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 3, "image_id": 1, "category_id": 1, "bbox": [16, 16, 8, -4, 10]})"),
                          "needs w > 0 and h > 0");
  // Finite numbers whose corners are not: 1e308 + 1.7e308 / 2 overflows.
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 3, "image_id": 1, "category_id": 1, "bbox": [1e308, 16, 1.7e308, 4, 0]})"),
                          "annotations[0] (id 3) in " + dir.file("x.json") + ": rotated bbox is not finite");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 3, "image_id": 1, "category_id": 1, "bbox": [16, 16, 8, 4, 1e999]})"),
                          "cannot be read as JSON");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 3, "image_id": 1, "category_id": 1, "bbox": [90, 90, 8, 4, 45]})"),
                          "(the rotated box's bounds x1, y1, x2, y2) lies outside its 32x32 image 1");

  const CocoInstances truth = read_coco_instances(dir.write("gt.json", rotated_json("")));
  auto read_results = [&](const std::string& text) { return read_coco_results(dir.write("r.json", text), &truth); };
  CHECK_THROWS_CONTAINING(read_results(R"([{"image_id": 1, "category_id": 1, "bbox": [1, 1, 8, 4], "score": 0.5},
                                           {"image_id": 1, "category_id": 1, "bbox": [9, 9, 8, 4, 3], "score": 0.5}])"),
                          "entry 1 in " + dir.file("r.json") + ": bbox has 5 numbers, a rotated box [cx, cy, w, h, angle "
                          "in degrees], but entry 0 has 4 numbers, a box [x, y, w, h]: a file holds one kind of box");
  CHECK_THROWS_CONTAINING(read_results(R"([{"image_id": 1, "category_id": 1, "bbox": [9, 9, 8], "score": 0.5}])"),
                          "entry 0 in " + dir.file("r.json") + ": bbox must have 4 numbers");
  CHECK_THROWS_CONTAINING(read_results(R"([{"image_id": 1, "category_id": 1, "bbox": [9, 9, 8, 0, 3], "score": 0.5}])"),
                          "needs w > 0 and h > 0");
  CHECK_THROWS_CONTAINING(read_results(R"([{"image_id": 1, "category_id": 1, "bbox": [1.7e308, 9, 1.7e308, 4, 0],
                                            "score": 0.5}])"),
                          "entry 0 in " + dir.file("r.json") + ": rotated bbox is not finite");
}

TEST_CASE("errors/coco_rotated: writing a file of two kinds is refused") {
  TempDir dir;
  const std::vector<Detection> mixed = {rotated_detection(1, 1, {4, 4, 2, 2, 0.1}, 0.9), {1, 1, {0, 0, 2, 2}, 0.8}};
  CHECK_THROWS_CONTAINING(write_coco_results(mixed, dir.file("r.json")),
                          "write_coco_results: detection 1 is axis-aligned but detection 0 is not");
  CocoInstances instances = read_coco_instances(dir.write("x.json", rotated_json(
      R"({"id": 1, "image_id": 1, "category_id": 1, "bbox": [16, 16, 8, 4, 10]})")));
  instances.annotations.push_back({2, 1, 1, {0, 0, 4, 4}, 16, false});
  CHECK_THROWS_CONTAINING(write_coco_instances(instances, dir.file("y.json")),
                          "write_coco_instances: annotation 2 is axis-aligned but the instances are rotated");
}
