// The synthetic shapes dataset: determinism, tight boxes, the promised statistics.
#include <algorithm>
#include <set>

#include "data/shapes/shapes_dataset.h"
#include "tests/support.h"

using namespace minidet::data;

namespace {

// The box around the pixels for which `inside(x, y)` holds, [min, max + 1); all zeros when there are none.
template <typename Predicate>
Box box_of_pixels(int64_t width, int64_t height, Predicate inside) {
  int64_t min_x = width, min_y = height, max_x = -1, max_y = -1;
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      if (inside(x, y)) {
        min_x = std::min(min_x, x);
        max_x = std::max(max_x, x);
        min_y = std::min(min_y, y);
        max_y = std::max(max_y, y);
      }
  if (max_x < 0) return {};
  return {double(min_x), double(min_y), double(max_x + 1), double(max_y + 1)};
}

}  // namespace

TEST_CASE("values/shapes: the same seed gives identical images and boxes") {
  ShapesOptions options;
  options.seed = 7;
  const ShapesDataset first(Split::kTrain, options), second(Split::kTrain, options);
  for (int64_t index : {0, 5, 17, 999}) {
    const Sample a = first.get(index), b = second.get(index);
    CHECK(a.image == b.image);
    CHECK(a.boxes == b.boxes);
    CHECK(a.labels == b.labels);
    CHECK(a.image_id == b.image_id);
  }
  // Random access: asking in another order changes nothing.
  const Sample late = first.get(17);
  first.get(3);
  CHECK(first.get(17).image == late.image);
  // Another seed or the other split gives other images.
  options.seed = 8;
  CHECK(ShapesDataset(Split::kTrain, options).get(5).image != first.get(5).image);
  CHECK(ShapesDataset(Split::kTest, ShapesOptions{}).get(5).image != ShapesDataset(Split::kTrain, ShapesOptions{}).get(5).image);
}

TEST_CASE("values/shapes: a fixed seed gives the same pixels on every machine") {
  // A fingerprint of a few images: any change in the generator, the layout or the rasterizer shows here.
  const ShapesDataset dataset(Split::kTrain, ShapesOptions{});
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over pixels, boxes and labels
  auto feed = [&hash](uint64_t value) { hash = (hash ^ value) * 1099511628211ull; };
  for (int64_t index = 0; index < 4; ++index) {
    const Sample sample = dataset.get(index);
    for (uint8_t value : sample.image.pixels) feed(value);
    for (const Box& box : sample.boxes) feed(static_cast<uint64_t>(box.x1 + 1000 * box.y1 + 1e6 * box.x2 + 1e9 * box.y2));
    for (int64_t label : sample.labels) feed(static_cast<uint64_t>(label));
  }
  MESSAGE("fingerprint " << hash);
  CHECK(hash == 3836119996665585877ull);
}

TEST_CASE("values/shapes: every box is tight around its object's pixels") {
  ShapesOptions options;
  options.noise_amplitude = 0;  // clean images, so an object's pixels are exactly those of its colour
  options.num_classes = 5;
  options.image_width = 96;
  options.image_height = 80;
  const ShapesDataset dataset(Split::kTest, options);
  int64_t single_objects_checked = 0;
  for (int64_t index = 0; index < 120; ++index) {
    const ShapesLayout layout = dataset.layout(index);
    const Sample sample = dataset.get(index);
    REQUIRE(sample.boxes.size() == layout.objects.size());
    for (size_t o = 0; o < layout.objects.size(); ++o) {
      const ShapeObject& object = layout.objects[o];
      // The box is the tight box of the object's whole mask (amodal: occluded parts included).
      CHECK(sample.boxes[o] == box_of_pixels(sample.image.width, sample.image.height,
                                             [&](int64_t x, int64_t y) { return object.mask.contains(x, y); }));
      CHECK(sample.boxes[o].area() > 0);
      // Every visible mask pixel shows the object's colour.
      for (int64_t y = 0; y < sample.image.height; ++y)
        for (int64_t x = 0; x < sample.image.width; ++x) {
          if (!object.mask.contains(x, y)) continue;
          const bool covered = std::any_of(layout.objects.begin() + o + 1, layout.objects.end(),
                                           [&](const ShapeObject& later) { return later.mask.contains(x, y); });
          if (!covered) CHECK(sample.image.color_at(x, y) == object.color);
        }
    }
    // With one object, the pixels that differ from the background give the box, from the image alone.
    if (layout.objects.size() == 1 && layout.objects[0].color != layout.background) {
      CHECK(sample.boxes[0] == box_of_pixels(sample.image.width, sample.image.height, [&](int64_t x, int64_t y) {
              return sample.image.color_at(x, y) != layout.background;
            }));
      ++single_objects_checked;
    }
  }
  CHECK(single_objects_checked > 10);
}

TEST_CASE("values/shapes: statistics follow the options") {
  ShapesOptions options;
  options.image_width = options.image_height = 128;
  options.num_classes = 5;
  options.train_images = 400;
  const ShapesDataset dataset(Split::kTrain, options);
  int64_t empty = 0;
  std::set<int64_t> labels_seen;
  for (int64_t index = 0; index < dataset.size(); ++index) {
    const Target target = dataset.target(index);
    CHECK(target.image_id == index + 1);
    CHECK(target.boxes.size() <= 4);
    empty += target.boxes.empty() ? 1 : 0;
    for (size_t i = 0; i < target.boxes.size(); ++i) {
      labels_seen.insert(target.labels[i]);
      const double side = std::max(target.boxes[i].width(), target.boxes[i].height());
      CHECK(side >= 0.1 * 128 - 2);
      CHECK(side <= 0.5 * 128 + 1);
      for (size_t j = 0; j < i; ++j) CHECK(box_iou(target.boxes[i], target.boxes[j]) <= 0.3);
    }
  }
  CHECK(empty >= 8);   // about 5% of 400
  CHECK(empty <= 40);
  CHECK(labels_seen == std::set<int64_t>{1, 2, 3, 4, 5});
  CHECK(dataset.class_names() == std::vector<std::string>{"square", "circle", "triangle", "cross", "ring"});
  CHECK(ShapesDataset(Split::kTest, options).size() == 200);
}

TEST_CASE("errors/shapes: bad options and indices") {
  ShapesOptions options;
  options.num_classes = 6;
  CHECK_THROWS_CONTAINING(ShapesDataset(Split::kTrain, options), "num_classes must be in 1..5");
  options = {};
  options.image_width = 8;
  CHECK_THROWS_CONTAINING(ShapesDataset(Split::kTrain, options), "at least 16x16");
  CHECK_THROWS_CONTAINING(ShapesDataset(Split::kTest, ShapesOptions{}).get(200), "index 200 is outside [0, 200)");
}
