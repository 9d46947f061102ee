// COCO files: export and re-import of the synthetic set, results files, and clear errors for bad input.
#include <filesystem>

#include "data/coco/coco_dataset.h"
#include "data/coco/coco_format.h"
#include "data/image/image_io.h"
#include "data/shapes/shapes_dataset.h"
#include "tests/data/temp_dir.h"
#include "tests/support.h"

using namespace minidet::data;
using minidet::test::TempDir;

namespace {

ShapesDataset small_shapes() {
  ShapesOptions options;
  options.test_images = 12;
  options.num_classes = 4;
  return ShapesDataset(Split::kTest, options);
}

// A valid two-image file with a few fields replaceable by the error cases.
std::string instances_json(const std::string& annotation = R"({"id": 1, "image_id": 1, "category_id": 3,
    "bbox": [2, 3, 10, 20], "area": 200, "iscrowd": 0})") {
  return R"({"images": [{"id": 1, "file_name": "a.png", "width": 32, "height": 32},
                       {"id": 2, "file_name": "b.png", "width": 32, "height": 32}],
             "categories": [{"id": 3, "name": "cat"}, {"id": 1, "name": "dog"}],
             "annotations": [)" + annotation + "]}";
}

}  // namespace

TEST_CASE("values/coco: export and re-import give identical annotations") {
  TempDir dir;
  const ShapesDataset shapes = small_shapes();
  export_coco(shapes, dir.file("shapes.json"), dir.file("images"));
  const CocoInstances expected = coco_instances_from_dataset(shapes);
  const CocoInstances read = read_coco_instances(dir.file("shapes.json"));
  CHECK(read.images == expected.images);
  CHECK(read.annotations == expected.annotations);
  CHECK(read.categories == expected.categories);
  CHECK(read.clipped_boxes == 0);

  const CocoDataset coco(dir.file("shapes.json"), dir.file("images"));
  REQUIRE(coco.size() == shapes.size());
  CHECK(coco.class_names() == shapes.class_names());
  for (int64_t index = 0; index < shapes.size(); ++index) {
    const Sample original = shapes.get(index), reread = coco.get(index);
    CHECK(reread.image == original.image);  // PNG is lossless
    CHECK(reread.boxes == original.boxes);
    CHECK(reread.labels == original.labels);
    CHECK(reread.image_id == original.image_id);
  }
}

TEST_CASE("values/coco: category ids map to contiguous labels") {
  TempDir dir;
  write_png(Image(32, 32), dir.file("a.png"));
  write_jpeg(Image(32, 32, {200, 10, 10}), dir.file("b.png"));  // content decides the codec, not the name
  const CocoDataset coco(dir.write("x.json", instances_json()), dir.path());
  CHECK(coco.class_names() == std::vector<std::string>{"dog", "cat"});  // by increasing id: 1, 3
  CHECK(coco.category_id(2) == 3);
  const Sample sample = coco.get(0);
  REQUIRE(sample.labels.size() == 1);
  CHECK(sample.labels[0] == 2);
  CHECK(sample.boxes[0] == Box{2, 3, 12, 23});
  CHECK(coco.get(1).boxes.empty());
  CHECK(coco.get(1).image.color_at(5, 5).r > 150);
}

TEST_CASE("values/coco: boxes reaching outside the image are clipped") {
  TempDir dir;
  const CocoInstances instances = read_coco_instances(dir.write("x.json", instances_json(
      R"({"id": 1, "image_id": 1, "category_id": 3, "bbox": [-4, 20, 10, 20]})")));
  CHECK(instances.clipped_boxes == 1);
  CHECK(instances.annotations[0].box == Box{0, 20, 6, 32});
  CHECK(instances.annotations[0].area == 72);  // missing area: the clipped box's
  CHECK_FALSE(instances.annotations[0].iscrowd);
}

TEST_CASE("values/coco: results files round trip") {
  TempDir dir;
  const std::vector<Detection> detections = {{1, 3, {1.5, 2, 11.25, 30}, 0.875}, {2, 1, {0, 0, 4, 4}, 0.125}};
  write_coco_results(detections, dir.file("results.json"));
  const CocoInstances truth = read_coco_instances(dir.write("x.json", instances_json()));
  const std::vector<Detection> read = read_coco_results(dir.file("results.json"), &truth);
  REQUIRE(read.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(read[i].image_id == detections[i].image_id);
    CHECK(read[i].category_id == detections[i].category_id);
    CHECK(read[i].box == detections[i].box);
    CHECK(read[i].score == detections[i].score);
  }
}

TEST_CASE("errors/coco: malformed json names the file and position") {
  TempDir dir;
  const std::string path = dir.write("broken.json", R"({"images": [ {"id": 1,, }])");
  CHECK_THROWS_CONTAINING(read_coco_instances(path), "broken.json is not valid JSON (at byte");
  CHECK_THROWS_CONTAINING(read_coco_instances(dir.file("absent.json")), "cannot open");
  CHECK_THROWS_CONTAINING(read_coco_instances(dir.write("list.json", "[1, 2]")), "expected a JSON object");
  CHECK_THROWS_CONTAINING(read_coco_instances(dir.write("none.json", R"({"images": []})")),
                          "missing top-level field 'categories'");
}

TEST_CASE("errors/coco: bad entries name the entry and field") {
  TempDir dir;
  auto read_with = [&](const std::string& annotation) {
    return read_coco_instances(dir.write("x.json", instances_json(annotation)));
  };
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 17, "image_id": 1, "category_id": 9, "bbox": [0, 0, 1, 1]})"),
                          "annotations[0] (id 17) in " + dir.file("x.json") + ": category_id 9 is not among the categories");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 4, "image_id": 5, "category_id": 1, "bbox": [0, 0, 1, 1]})"),
                          "image_id 5 is not among the images");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 4, "image_id": 1, "category_id": 1})"), "missing field 'bbox'");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 4, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1]})"),
                          "bbox must have 4 numbers");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 4, "image_id": 1, "category_id": 1, "bbox": [0, 0, -1, 5]})"),
                          "negative width or height");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 4, "image_id": 1, "category_id": 1, "bbox": [40, 0, 5, 5]})"),
                          "lies outside its 32x32 image 1");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": "4", "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]})"),
                          "field 'id' must be an integer");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 4, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "iscrowd": 2})"),
                          "field 'iscrowd' must be 0 or 1");
  CHECK_THROWS_CONTAINING(read_with(R"({"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]},
                                       {"id": 1, "image_id": 2, "category_id": 1, "bbox": [0, 0, 1, 1]})"),
                          "annotation id 1 appears more than once");
}

TEST_CASE("errors/coco: missing and corrupt image files") {
  TempDir dir;
  const std::string json = dir.write("x.json", instances_json());
  write_png(Image(32, 32), dir.file("a.png"));
  CHECK_THROWS_CONTAINING(CocoDataset(json, dir.path()), "images[1] (id 2) in " + json + ": image file " +
                                                              dir.file("b.png") + " does not exist");
  dir.write("b.png", "\x89PNG\r\n\x1a\n but then garbage");
  const CocoDataset coco(json, dir.path());
  CHECK_THROWS_CONTAINING(coco.get(1), "read_png: cannot");
  write_png(Image(16, 32), dir.file("b.png"));
  CHECK_THROWS_CONTAINING(coco.get(1), "is 16x32 but the file says 32x32");
}

TEST_CASE("errors/coco: results that do not fit the ground truth") {
  TempDir dir;
  const CocoInstances truth = read_coco_instances(dir.write("x.json", instances_json()));
  auto read_results = [&](const std::string& text) { return read_coco_results(dir.write("r.json", text), &truth); };
  CHECK_THROWS_CONTAINING(read_results(R"([{"image_id": 1, "category_id": 9, "bbox": [0, 0, 1, 1], "score": 0.5}])"),
                          "entry 0 in " + dir.file("r.json") + ": category_id 9 is not among the ground-truth categories");
  CHECK_THROWS_CONTAINING(read_results(R"([{"image_id": 3, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5}])"),
                          "image_id 3 is not among the ground-truth images");
  CHECK_THROWS_CONTAINING(read_results(R"([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]}])"),
                          "missing field 'score'");
  CHECK_THROWS_CONTAINING(read_results(R"({"image_id": 1})"), "expected a JSON array");
  CHECK_THROWS_CONTAINING(read_results("[{"), "is not valid JSON");
}
