// The synthetic rotated-shapes dataset: determinism, boxes inside the image and normalised, the classes and
// their aspects, the painted pixels against the rotated boxes, overlaps, empty images, the rasterizers and
// bad options.
#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "core/factories.h"
#include "data/shapes/rasterize.h"
#include "data/shapes/rotated_shapes_dataset.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"
#include "tests/support.h"

using namespace minidet;
using namespace minidet::data;

namespace {

constexpr double kPi = 3.14159265358979323846;

// Whether (x, y) lies inside the convex polygon of a box's corners (counter-clockwise on screen: the inside
// is on the left of every directed edge, cross >= 0, as ops/box_iou_rotated describes), within `slack`
// pixels. Independent of the rasterizer's projection test.
bool inside_polygon(const RotatedBox& box, double x, double y, double slack = 1e-9) {
  const std::vector<double> c = box.corners();
  for (int k = 0; k < 4; ++k) {
    const double x0 = c[2 * k], y0 = c[2 * k + 1], x1 = c[(2 * k + 2) % 8], y1 = c[(2 * k + 3) % 8];
    const double edge = std::hypot(x1 - x0, y1 - y0);
    const double cross = (x1 - x0) * (y - y0) - (y1 - y0) * (x - x0);
    if (cross < -slack * edge) return false;
  }
  return true;
}

// How many pixel centres of a width x height image lie inside the box.
int64_t pixels_inside(const RotatedBox& box, int64_t width, int64_t height) {
  int64_t count = 0;
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) count += inside_polygon(box, x + 0.5, y + 0.5) ? 1 : 0;
  return count;
}

RotatedShapesOptions clean_options(uint64_t seed = 3) {
  RotatedShapesOptions options;
  options.seed = seed;
  options.noise_amplitude = 0;
  options.empty_fraction = 0;
  return options;
}

}  // namespace

TEST_CASE("values/rotated_shapes: the same seed gives identical images and boxes") {
  RotatedShapesOptions options;
  options.seed = 7;
  const RotatedShapesDataset first(Split::kTrain, options), second(Split::kTrain, options);
  CHECK(first.size() == 1000);
  CHECK(first.class_names() == std::vector<std::string>{"rectangle", "ellipse", "bar"});
  for (int64_t index : {0, 5, 17, 999}) {
    const Sample a = first.get(index), b = second.get(index);
    CHECK(a.image == b.image);
    CHECK(a.rotated_boxes == b.rotated_boxes);
    CHECK(a.labels == b.labels);
    CHECK(a.image_id == index + 1);
  }
  // Random access: asking in another order changes nothing.
  const Sample late = first.get(17);
  (void)first.get(3);
  CHECK(first.get(17).image == late.image);
  CHECK(first.get(17).rotated_boxes == late.rotated_boxes);
  // Another seed, the other split, or ShapesDataset with the same seed: other images.
  options.seed = 8;
  CHECK(RotatedShapesDataset(Split::kTrain, options).get(5).image != first.get(5).image);
  CHECK(RotatedShapesDataset(Split::kTest, RotatedShapesOptions{}).get(5).image !=
        RotatedShapesDataset(Split::kTrain, RotatedShapesOptions{}).get(5).image);
  // The boxes tensor: (M, 5) rows in box order, float32 unless asked.
  const Sample sample = first.get(5);
  const Tensor boxes = rotated_boxes_tensor(sample.rotated_boxes, kFloat64);
  CHECK(boxes.sizes() == Shape{static_cast<int64_t>(sample.rotated_boxes.size()), 5});
  if (!sample.rotated_boxes.empty()) {
    const RotatedBox& b = sample.rotated_boxes[0];
    CHECK(boxes.narrow(0, 0, 1).to_vector<double>() == std::vector<double>{b.cx, b.cy, b.w, b.h, b.angle});
  }
  CHECK(rotated_boxes_tensor(sample.rotated_boxes).dtype() == kFloat32);
  CHECK(rotated_boxes_tensor({}).sizes() == Shape{0, 5});
}

TEST_CASE("values/rotated_shapes: a Dataset whose boxes are the rotated boxes' bounding boxes") {
  const RotatedShapesDataset dataset(Split::kTest, RotatedShapesOptions{});
  const Dataset& any = dataset;
  CHECK(any.rotated());
  CHECK(any.num_classes() == 3);
  int64_t objects = 0;
  for (int64_t index = 0; index < 20; ++index) {
    const Sample sample = any.get(index);
    check_sample(sample, 3, "rotated shapes");
    REQUIRE(sample.boxes.size() == sample.rotated_boxes.size());
    for (size_t k = 0; k < sample.boxes.size(); ++k) {
      const RotatedBox& r = sample.rotated_boxes[k];
      const Box& b = sample.boxes[k];
      CHECK(b == bounding_box(r));
      // The hull touches every side of the box's corners and holds the centre.
      const std::vector<double> c = r.corners();
      double low_x = c[0], high_x = c[0];
      for (size_t j = 0; j < c.size(); j += 2) low_x = std::min(low_x, c[j]), high_x = std::max(high_x, c[j]);
      CHECK(b.x1 == low_x);
      CHECK(b.x2 == high_x);
      CHECK(b.x1 < r.cx);
      CHECK(r.cy < b.y2);
      ++objects;
    }
    // target() gives get()'s annotations without the pixels.
    const Target target = any.target(index);
    CHECK(target.image_id == sample.image_id);
    CHECK(target.boxes == sample.boxes);
    CHECK(target.rotated_boxes == sample.rotated_boxes);
    CHECK(target.labels == sample.labels);
  }
  CHECK(objects > 20);
}

TEST_CASE("values/rotated_shapes: every box is inside the image normalised long edge first with classes 1..3") {
  const RotatedShapesOptions options = clean_options();
  const RotatedShapesDataset dataset(Split::kTrain, options);
  std::set<int64_t> seen;
  int64_t objects = 0, negative_angles = 0, positive_angles = 0;
  for (int64_t index = 0; index < 200; ++index) {
    const RotatedShapesLayout layout = dataset.layout(index);
    const Sample sample = dataset.get(index);
    REQUIRE(sample.rotated_boxes.size() == sample.labels.size());
    REQUIRE(sample.rotated_boxes.size() == layout.objects.size());
    CHECK(sample.rotated_boxes.size() <= 4);
    for (size_t k = 0; k < sample.rotated_boxes.size(); ++k) {
      const RotatedBox& box = sample.rotated_boxes[k];
      const int64_t label = sample.labels[k];
      CAPTURE(index);
      CAPTURE(k);
      CHECK(label >= 1);
      CHECK(label <= 3);
      seen.insert(label);
      // Normalised: the angle in [-pi/2, pi/2), w >= h >= min_thickness.
      CHECK(box.angle >= -kPi / 2);
      CHECK(box.angle < kPi / 2);
      CHECK(box.w >= box.h);
      CHECK(box.h >= options.min_thickness);
      (box.angle < 0 ? negative_angles : positive_angles) += 1;
      // All four corners inside with the margin.
      const std::vector<double> corners = box.corners();
      for (size_t c = 0; c < corners.size(); c += 2) {
        CHECK(corners[c] >= options.margin);
        CHECK(corners[c] <= options.image_width - options.margin);
        CHECK(corners[c + 1] >= options.margin);
        CHECK(corners[c + 1] <= options.image_height - options.margin);
      }
      // Painted largest box first.
      if (k > 0) CHECK(layout.objects[k - 1].box.area() >= box.area());
      ++objects;
    }
  }
  CHECK(seen == std::set<int64_t>{1, 2, 3});
  CHECK(objects > 200);
  // Angles cover the whole range, both signs.
  CHECK(negative_angles > objects / 4);
  CHECK(positive_angles > objects / 4);
}

TEST_CASE("values/rotated_shapes: bars are 4 to 10 times longer than thick and rectangles at most max_aspect") {
  const RotatedShapesOptions options = clean_options(11);
  const RotatedShapesDataset dataset(Split::kTest, options);
  int64_t bars = 0, others = 0;
  double longest_bar_aspect = 0;
  for (int64_t index = 0; index < dataset.size(); ++index) {
    const Sample sample = dataset.get(index);
    for (size_t k = 0; k < sample.rotated_boxes.size(); ++k) {
      const double aspect = sample.rotated_boxes[k].w / sample.rotated_boxes[k].h;
      CAPTURE(index);
      if (sample.labels[k] == 3) {
        CHECK(aspect >= 4.0 * (1 - 1e-12));
        CHECK(aspect <= 10.0 * (1 + 1e-12));
        longest_bar_aspect = std::max(longest_bar_aspect, aspect);
        ++bars;
      } else {
        CHECK(aspect >= 1.0);
        CHECK(aspect <= options.max_aspect * (1 + 1e-12));
        ++others;
      }
    }
  }
  CHECK(bars > 20);
  CHECK(others > 40);
  CHECK(longest_bar_aspect > 7);  // the long thin ones do occur
}

TEST_CASE("values/rotated_shapes: painted pixels lie inside the rotated box and fill it") {
  const RotatedShapesOptions options = clean_options(5);
  const RotatedShapesDataset dataset(Split::kTrain, options);
  double rectangle_pixels = 0, rectangle_area = 0, ellipse_pixels = 0, ellipse_area = 0;
  int64_t rectangles = 0, ellipses = 0;
  for (int64_t index = 0; index < 60; ++index) {
    const RotatedShapesLayout layout = dataset.layout(index);
    const Sample sample = dataset.get(index);
    for (size_t k = 0; k < layout.objects.size(); ++k) {
      const RotatedShapeObject& object = layout.objects[k];
      const RotatedBox& box = object.box;
      CAPTURE(index);
      CAPTURE(k);
      CHECK(box == sample.rotated_boxes[k]);
      // Every painted pixel centre of the object lies inside its box (for an ellipse too: it is inscribed).
      int64_t outside = 0;
      for (int64_t y = object.mask.y0; y < object.mask.y0 + object.mask.height; ++y)
        for (int64_t x = object.mask.x0; x < object.mask.x0 + object.mask.width; ++x)
          if (object.mask.contains(x, y) && !inside_polygon(box, x + 0.5, y + 0.5)) ++outside;
      CHECK(outside == 0);
      const double count = static_cast<double>(object.mask.count());
      if (object.kind == RotatedShapeKind::kEllipse) {
        ellipse_pixels += count;
        ellipse_area += box.area();
        ++ellipses;
      } else {
        // A rectangle or a bar is its box: it has every pixel centre the polygon has (up to centres on the
        // outline, where the two tests may round apart), and about w * h of them.
        const int64_t in_polygon = pixels_inside(box, options.image_width, options.image_height);
        CHECK(std::abs(count - static_cast<double>(in_polygon)) <= 2);
        CHECK(count >= 0.6 * box.area());
        rectangle_pixels += count;
        rectangle_area += box.area();
        ++rectangles;
      }
      // The image shows the object's colour wherever no later (smaller) object covers it, and nothing else
      // was painted with it there.
      for (int64_t y = object.mask.y0; y < object.mask.y0 + object.mask.height; ++y)
        for (int64_t x = object.mask.x0; x < object.mask.x0 + object.mask.width; ++x) {
          if (!object.mask.contains(x, y)) continue;
          bool covered = false;
          for (size_t later = k + 1; later < layout.objects.size(); ++later)
            covered = covered || layout.objects[later].mask.contains(x, y);
          if (!covered) CHECK(sample.image.color_at(x, y) == object.color);
        }
    }
    // Pixels outside every mask keep the background.
    for (int64_t y = 0; y < options.image_height; ++y)
      for (int64_t x = 0; x < options.image_width; ++x) {
        bool painted = false;
        for (const RotatedShapeObject& object : layout.objects) painted = painted || object.mask.contains(x, y);
        if (!painted) CHECK(sample.image.color_at(x, y) == layout.background);
      }
  }
  REQUIRE(rectangles > 20);
  REQUIRE(ellipses > 10);
  // Over many shapes the pixel count is the area: w h for a rectangle, pi/4 w h for an ellipse.
  CHECK(rectangle_pixels / rectangle_area == doctest::Approx(1.0).epsilon(0.08));
  CHECK(ellipse_pixels / ellipse_area == doctest::Approx(kPi / 4).epsilon(0.08));
}

TEST_CASE("values/rotated_shapes: rotated overlaps stay at or below max_overlap_iou") {
  for (double max_iou : {0.0, 0.2, 0.5}) {
    RotatedShapesOptions options = clean_options(21);
    options.max_overlap_iou = max_iou;
    options.max_objects = 6;
    const RotatedShapesDataset dataset(Split::kTrain, options);
    double worst = 0;
    int64_t pairs = 0;
    for (int64_t index = 0; index < 100; ++index) {
      const Sample sample = dataset.get(index);
      const int64_t m = static_cast<int64_t>(sample.rotated_boxes.size());
      if (m < 2) continue;
      const Tensor boxes = rotated_boxes_tensor(sample.rotated_boxes, kFloat64);
      const std::vector<double> iou = box_iou_rotated(boxes, boxes).to_vector<double>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < m; ++j)
          if (i != j) {
            worst = std::max(worst, iou[i * m + j]);
            ++pairs;
          }
    }
    CAPTURE(max_iou);
    CHECK(pairs > 100);
    CHECK(worst <= max_iou);
    if (max_iou > 0) CHECK(worst > 0);  // overlaps up to the bound do happen
  }
}

TEST_CASE("values/rotated_shapes: empty images come at the configured fraction") {
  RotatedShapesOptions options;
  options.train_images = 400;
  for (double fraction : {0.0, 0.25, 1.0}) {
    options.empty_fraction = fraction;
    const RotatedShapesDataset dataset(Split::kTrain, options);
    int64_t empty = 0;
    for (int64_t index = 0; index < dataset.size(); ++index) {
      const Sample sample = dataset.get(index);
      if (sample.rotated_boxes.empty()) ++empty;
      CHECK(sample.image.width == 64);
      CHECK(sample.image.height == 64);
    }
    CAPTURE(fraction);
    // A non-empty draw can lose every object only if no placement fits in 30 tries; at these sizes the
    // first object always fits, so the count follows the fraction alone.
    CHECK(std::abs(static_cast<double>(empty) / 400 - fraction) <= 0.07);  // 3 standard deviations at 0.25
    if (fraction == 0.0) CHECK(empty == 0);
    if (fraction == 1.0) CHECK(empty == 400);
  }
  options.empty_fraction = 0;
  options.max_objects = 0;
  CHECK(RotatedShapesDataset(Split::kTrain, options).get(0).rotated_boxes.empty());
}

TEST_CASE("values/rotated_shapes: the rotated rasterizers on known boxes") {
  // Angle 0: a 8 x 4 rectangle centred on (8, 8) covers the pixels x in [4, 12), y in [6, 10).
  const Mask flat = rasterize_rotated_rectangle(8, 8, 8, 4, 0.0, 16, 16);
  CHECK(flat.count() == 32);
  CHECK(flat.contains(4, 6));
  CHECK(flat.contains(11, 9));
  CHECK(!flat.contains(12, 8));
  CHECK(!flat.contains(8, 10));
  // A quarter turn (normalised, -pi/2): the box's x axis (cos a, -sin a) = (0, 1) points down the image.
  const Mask upright = rasterize_rotated_rectangle(8, 8, 8, 4, -kPi / 2, 16, 16);
  CHECK(upright.count() == 32);
  CHECK(upright.contains(6, 4));
  CHECK(upright.contains(9, 11));
  CHECK(!upright.contains(4, 6));
  // Counter-clockwise on screen: at a = pi/4 the long axis points up and to the right, (1, -1) / sqrt 2.
  const Mask diagonal = rasterize_rotated_rectangle(16, 16, 20, 2, kPi / 4, 32, 32);
  CHECK(diagonal.contains(22, 9));   // centre + (6.5, -6.5): along the axis
  CHECK(!diagonal.contains(22, 22)); // centre + (6.5, 6.5): across it
  // An ellipse with axes 12 and 6 at angle 0: its extreme pixels, and not the box's corners.
  const Mask ellipse = rasterize_rotated_ellipse(8, 8, 12, 6, 0.0, 16, 16);
  CHECK(ellipse.contains(2, 7));
  CHECK(ellipse.contains(13, 8));
  CHECK(!ellipse.contains(2, 5));
  CHECK(std::abs(static_cast<double>(ellipse.count()) - kPi / 4 * 72) < 6);
  // Pixels outside the image are left out; an empty box paints nothing.
  CHECK(rasterize_rotated_rectangle(0, 0, 4, 4, 0.3, 16, 16).count() < 16);
  CHECK(rasterize_rotated_rectangle(8, 8, 0, 4, 0.0, 16, 16).count() == 0);
  CHECK(rasterize_rotated_ellipse(8, 8, 4, -1, 0.0, 16, 16).count() == 0);
}

TEST_CASE("errors/rotated_shapes: bad options and indices") {
  auto with = [](auto change) {
    RotatedShapesOptions options;
    change(options);
    return options;
  };
  using O = RotatedShapesOptions;
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.image_width = 8; })),
                          "images must be at least 16x16");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.num_classes = 4; })),
                          "num_classes must be in 1..3");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.num_classes = 0; })),
                          "num_classes must be in 1..3");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.max_objects = -1; })),
                          "max_objects must be >= 0");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.empty_fraction = 1.5; })),
                          "empty_fraction must be in [0, 1]");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.empty_fraction = std::nan(""); })),
                          "empty_fraction must be in [0, 1]");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.min_object_fraction = 0; })),
                          "need 0 < min_object_fraction");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.max_object_fraction = 0.1; })),
                          "need 0 < min_object_fraction");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.max_object_fraction = 1.5; })),
                          "need 0 < min_object_fraction");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.max_aspect = 0.5; })),
                          "max_aspect");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.min_bar_aspect = 2; })),
                          "need max_aspect < min_bar_aspect <= max_bar_aspect");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.max_bar_aspect = 3; })),
                          "need max_aspect < min_bar_aspect <= max_bar_aspect");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.max_bar_aspect = INFINITY; })),
                          "need max_aspect < min_bar_aspect <= max_bar_aspect");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.min_thickness = 0; })),
                          "min_thickness must be in (0, 16]");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.margin = -1; })),
                          "margin must be in [0, 16]");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.margin = 20; })),
                          "margin must be in [0, 16]");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.max_overlap_iou = -0.1; })),
                          "max_overlap_iou must be in [0, 1]");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.noise_amplitude = 300; })),
                          "noise_amplitude must be in 0..255");
  CHECK_THROWS_CONTAINING(RotatedShapesDataset(Split::kTrain, with([](O& o) { o.test_images = -1; })),
                          "negative split size");
  const RotatedShapesDataset dataset(Split::kTest, RotatedShapesOptions{});
  CHECK_THROWS_CONTAINING(dataset.get(200), "RotatedShapesDataset (test): index 200 is outside [0, 200)");
  CHECK_THROWS_CONTAINING(dataset.layout(-1), "index -1 is outside");
}
