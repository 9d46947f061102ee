// Transforms move boxes with the pixels.
#include <cmath>

#include "core/factories.h"
#include "data/shapes/rotated_shapes_dataset.h"
#include "data/shapes/shapes_dataset.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"
#include "data/transforms/transforms.h"
#include "tests/support.h"

using namespace minidet::data;

namespace {

// A clean single-object image: the object's pixels are exactly the non-background ones.
Sample one_object_sample(Color background) {
  Sample sample;
  sample.image = Image(40, 30, background);
  for (int64_t y = 5; y < 12; ++y)
    for (int64_t x = 3; x < 10; ++x) sample.image.set(x, y, {250, 250, 250});
  sample.boxes = {{3, 5, 10, 12}};
  sample.labels = {1};
  return sample;
}

}  // namespace

TEST_CASE("values/transforms: horizontal flip mirrors pixels and boxes") {
  const Sample original = one_object_sample({0, 0, 0});
  const Sample flipped = horizontal_flip(original);
  CHECK(flipped.boxes[0] == Box{30, 5, 37, 12});  // (W - x2, y1, W - x1, y2) with W = 40
  CHECK(flipped.image.color_at(30, 5) == Color{250, 250, 250});
  CHECK(flipped.image.color_at(36, 11) == Color{250, 250, 250});
  CHECK(flipped.image.color_at(29, 5) == Color{0, 0, 0});
  CHECK(flipped.image.color_at(37, 5) == Color{0, 0, 0});
  const Sample back = horizontal_flip(flipped);
  CHECK(back.image == original.image);
  CHECK(back.boxes == original.boxes);
  CHECK(!original.flipped);
  CHECK(flipped.flipped);
  CHECK(!back.flipped);  // mirrored twice: the original again
}

TEST_CASE("values/transforms: flipped shapes keep tight boxes") {
  ShapesOptions options;
  options.noise_amplitude = 0;
  const ShapesDataset dataset(Split::kTrain, options);
  for (int64_t index = 0; index < 20; ++index) {
    const Sample flipped = horizontal_flip(dataset.get(index));
    const ShapesLayout layout = dataset.layout(index);
    for (size_t o = 0; o < layout.objects.size(); ++o) {
      // The mirrored mask's tight box, computed from the unflipped mask.
      const Mask& mask = layout.objects[o].mask;
      int64_t min_x = INT64_MAX, max_x = -1;
      for (int64_t y = 0; y < 64; ++y)
        for (int64_t x = 0; x < 64; ++x)
          if (mask.contains(x, y)) {
            min_x = std::min(min_x, 63 - x);
            max_x = std::max(max_x, 63 - x);
          }
      CHECK(flipped.boxes[o].x1 == min_x);
      CHECK(flipped.boxes[o].x2 == max_x + 1);
    }
  }
}

TEST_CASE("values/transforms: resize scales boxes with the image") {
  const Sample original = one_object_sample({0, 0, 0});
  const Sample doubled = resize(original, 80, 60);
  CHECK(doubled.image.width == 80);
  CHECK(doubled.image.height == 60);
  CHECK(doubled.boxes[0] == Box{6, 10, 20, 24});
  // Inside the scaled box the object is still there; well outside it, background.
  CHECK(doubled.image.color_at(13, 17).r == 250);
  CHECK(doubled.image.color_at(3, 17).r == 0);
  CHECK(doubled.image.color_at(13, 30).r == 0);
  const Sample squeezed = resize(original, 20, 45);
  CHECK(squeezed.boxes[0] == Box{1.5, 7.5, 5, 18});
  // Resizing to the same size changes nothing.
  CHECK(resize(original, 40, 30).image == original.image);
}

TEST_CASE("values/transforms: a flip mirrors rotated boxes and keeps their angle in range") {
  constexpr double kPi = 3.14159265358979323846;
  Sample sample = one_object_sample({0, 0, 0});
  sample.boxes = {{3, 5, 10, 12}, {3, 5, 10, 12}, {3, 5, 10, 12}};
  sample.labels = {1, 1, 1};
  sample.rotated_boxes = {{10, 8, 6, 2, 0.3}, {12, 20, 9, 3, -kPi / 2}, {5, 6, 4, 4, 0}};
  const Sample flipped = horizontal_flip(sample);
  REQUIRE(flipped.rotated_boxes.size() == 3);
  CHECK(flipped.rotated_boxes[0] == RotatedBox{30, 8, 6, 2, -0.3});
  // -(-pi/2) = pi/2 is outside [-pi/2, pi/2): it wraps back to -pi/2, the same box.
  CHECK(flipped.rotated_boxes[1] == RotatedBox{28, 20, 9, 3, -kPi / 2});
  CHECK(flipped.rotated_boxes[2] == RotatedBox{35, 6, 4, 4, 0});
  // Twice is the original; the bounding boxes flip with their rotated boxes.
  CHECK(horizontal_flip(flipped).rotated_boxes == sample.rotated_boxes);
  // On painted shapes: the flipped box is where the mirrored pixels are (its corners mirror the original's).
  const RotatedShapesDataset dataset(Split::kTrain, RotatedShapesOptions{});
  for (int64_t index = 0; index < 10; ++index) {
    const Sample original = dataset.get(index), mirrored = horizontal_flip(original);
    for (size_t k = 0; k < original.rotated_boxes.size(); ++k) {
      const std::vector<double> a = original.rotated_boxes[k].corners(), b = mirrored.rotated_boxes[k].corners();
      // The same corner set, mirrored: every corner of b is some corner of a with x -> 64 - x.
      for (size_t j = 0; j < b.size(); j += 2) {
        double nearest = 1e9;
        for (size_t i = 0; i < a.size(); i += 2)
          nearest = std::min(nearest, std::hypot(64 - a[i] - b[j], a[i + 1] - b[j + 1]));
        CHECK(nearest < 1e-9);
      }
      CHECK(mirrored.boxes[k].x1 == doctest::Approx(64 - original.boxes[k].x2));
    }
  }
}

TEST_CASE("values/transforms: resize scales rotated boxes and refuses a stretch") {
  Sample sample = one_object_sample({0, 0, 0});
  sample.rotated_boxes = {{6.5, 8.5, 7, 7, 0.25}};
  const Sample doubled = resize(sample, 80, 60);
  CHECK(doubled.rotated_boxes[0] == RotatedBox{13, 17, 14, 14, 0.25});
  CHECK_THROWS_CONTAINING(resize(sample, 80, 30), "resize: a sample with rotated boxes must keep its aspect ratio");
  sample.rotated_boxes.clear();
  CHECK_NOTHROW(resize(sample, 80, 30));
}

TEST_CASE("values/transforms: normalize and random flip") {
  minidet::Tensor image = minidet::full({3, 2, 2}, 0.5);
  const minidet::Tensor normalized = normalize(image, {0.5f, 0.25f, 0.0f}, {1.0f, 0.5f, 2.0f});
  const std::vector<float> values = normalized.to_vector<float>();
  CHECK(values[0] == doctest::Approx(0.0));
  CHECK(values[4] == doctest::Approx(0.5));
  CHECK(values[8] == doctest::Approx(0.25));
  CHECK(image.to_vector<float>()[0] == doctest::Approx(0.5));  // the input is untouched
  CHECK_THROWS_CONTAINING(normalize(minidet::zeros({2, 4, 4})), "normalize: expected");

  const Transform always = random_horizontal_flip(1.0), never = random_horizontal_flip(0.0);
  minidet::Generator generator(3);
  const Sample original = one_object_sample({0, 0, 0});
  CHECK(always(original, generator).boxes[0] == Box{30, 5, 37, 12});
  CHECK(always(original, generator).flipped);
  CHECK(never(original, generator).boxes[0] == original.boxes[0]);
  CHECK(!never(original, generator).flipped);
  const Transform both = compose({always, resize_to(20, 15)});
  CHECK(both(original, generator).boxes[0] == Box{15, 2.5, 18.5, 6});
}
