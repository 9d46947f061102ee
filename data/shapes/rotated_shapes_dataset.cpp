// RotatedShapesDataset: the layout of an image drawn from its own generator, rotated placements checked
// with box_iou_rotated, then painting and noise (the steps and conventions in rotated_shapes_dataset.h).
#include "data/shapes/rotated_shapes_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/factories.h"
#include "core/generator.h"
#include "data/shapes/paint.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"

namespace minidet::data {

const char* rotated_shape_kind_name(RotatedShapeKind kind) {
  switch (kind) {
    case RotatedShapeKind::kRectangle: return "rectangle";
    case RotatedShapeKind::kEllipse: return "ellipse";
    case RotatedShapeKind::kBar: return "bar";
  }
  return "unknown";
}

namespace {

constexpr double kPi = 3.14159265358979323846;

// Uniform in [low, high).
double uniform(Generator& generator, double low, double high) { return low + (high - low) * generator.next_uniform(); }

// Every corner at least `margin` inside [0, width] x [0, height], checked on the corners as the box
// convention computes them (the centre was drawn to make this true; this guards the last bit of rounding).
bool inside_image(const RotatedBox& box, double width, double height, double margin) {
  const std::vector<double> corners = box.corners();
  for (size_t k = 0; k < corners.size(); k += 2)
    if (!(corners[k] >= margin && corners[k] <= width - margin && corners[k + 1] >= margin &&
          corners[k + 1] <= height - margin))
      return false;
  return true;
}

}  // namespace

RotatedShapesDataset::RotatedShapesDataset(Split split, RotatedShapesOptions options)
    : split_(split), options_(options) {
  const RotatedShapesOptions& o = options_;
  MINIDET_CHECK(o.image_width >= 16 && o.image_height >= 16,
                "RotatedShapesDataset: images must be at least 16x16, got ", o.image_width, "x", o.image_height);
  MINIDET_CHECK(o.num_classes >= 1 && o.num_classes <= kNumRotatedShapeKinds,
                "RotatedShapesDataset: num_classes must be in 1..", kNumRotatedShapeKinds, ", got ", o.num_classes);
  MINIDET_CHECK(o.max_objects >= 0, "RotatedShapesDataset: max_objects must be >= 0, got ", o.max_objects);
  MINIDET_CHECK(o.empty_fraction >= 0 && o.empty_fraction <= 1,
                "RotatedShapesDataset: empty_fraction must be in [0, 1], got ", o.empty_fraction);
  MINIDET_CHECK(o.min_object_fraction > 0 && o.min_object_fraction <= o.max_object_fraction &&
                    o.max_object_fraction <= 1,
                "RotatedShapesDataset: need 0 < min_object_fraction <= max_object_fraction <= 1, got ",
                o.min_object_fraction, " and ", o.max_object_fraction);
  MINIDET_CHECK(std::isfinite(o.max_aspect) && o.max_aspect >= 1,
                "RotatedShapesDataset: max_aspect (long / short side of rectangles and ellipses) must be finite and "
                ">= 1, got ", o.max_aspect);
  // Bars longer than any rectangle keep the classes apart by shape, not only by name.
  MINIDET_CHECK(std::isfinite(o.max_bar_aspect) && o.max_aspect < o.min_bar_aspect &&
                    o.min_bar_aspect <= o.max_bar_aspect,
                "RotatedShapesDataset: need max_aspect < min_bar_aspect <= max_bar_aspect (finite), so a bar is never "
                "a rectangle's shape; got ", o.max_aspect, ", ", o.min_bar_aspect, " and ", o.max_bar_aspect);
  const double shorter_side = static_cast<double>(std::min(o.image_width, o.image_height));
  MINIDET_CHECK(std::isfinite(o.min_thickness) && o.min_thickness > 0 && o.min_thickness <= shorter_side / 4,
                "RotatedShapesDataset: min_thickness must be in (0, ", shorter_side / 4,
                "] pixels (a quarter of the shorter side), got ", o.min_thickness);
  MINIDET_CHECK(o.margin >= 0 && o.margin <= shorter_side / 4, "RotatedShapesDataset: margin must be in [0, ",
                shorter_side / 4, "] pixels (a quarter of the shorter side), got ", o.margin);
  MINIDET_CHECK(o.max_overlap_iou >= 0 && o.max_overlap_iou <= 1,
                "RotatedShapesDataset: max_overlap_iou must be in [0, 1], got ", o.max_overlap_iou);
  MINIDET_CHECK(o.noise_amplitude >= 0 && o.noise_amplitude <= 255,
                "RotatedShapesDataset: noise_amplitude must be in 0..255, got ", o.noise_amplitude);
  MINIDET_CHECK(o.train_images >= 0 && o.test_images >= 0, "RotatedShapesDataset: negative split size (",
                o.train_images, " train, ", o.test_images, " test)");
}

int64_t RotatedShapesDataset::size() const {
  return split_ == Split::kTrain ? options_.train_images : options_.test_images;
}

std::vector<std::string> RotatedShapesDataset::class_names() const {
  std::vector<std::string> names;
  for (int64_t label = 1; label <= options_.num_classes; ++label)
    names.push_back(rotated_shape_kind_name(static_cast<RotatedShapeKind>(label)));
  return names;
}

void RotatedShapesDataset::check_index(int64_t index) const {
  MINIDET_CHECK(index >= 0 && index < size(), "RotatedShapesDataset (", split_name(split_), "): index ", index,
                " is outside [0, ", size(), ")");
}

uint64_t RotatedShapesDataset::image_seed(int64_t index) const {
  // ShapesDataset's derivation with one more tag, so the two datasets never share a stream for one seed.
  const uint64_t dataset_tag = 0x726f7461746564ull;                                // "rotated"
  const uint64_t split_tag = split_ == Split::kTrain ? 0x7472616eull : 0x74657374ull;  // "tran", "test"
  return mix_seed(mix_seed(mix_seed(mix_seed(options_.seed) ^ dataset_tag) ^ split_tag) ^
                  static_cast<uint64_t>(index));
}

RotatedShapesLayout RotatedShapesDataset::layout(int64_t index) const {
  check_index(index);
  const RotatedShapesOptions& o = options_;
  Generator generator(image_seed(index));
  RotatedShapesLayout layout;
  layout.background = random_color(generator);

  const bool empty = generator.next_uniform() < o.empty_fraction;
  const int64_t wanted = (empty || o.max_objects == 0) ? 0 : generator.next_int(1, o.max_objects + 1);
  const double width = static_cast<double>(o.image_width), height = static_cast<double>(o.image_height);
  const double shorter_side = std::min(width, height);
  std::vector<RotatedBox> placed;  // the boxes so far, for the overlap test
  for (int64_t object = 0; object < wanted; ++object) {
    for (int attempt = 0; attempt < kPlacementAttempts; ++attempt) {
      RotatedShapeObject candidate;
      candidate.kind = static_cast<RotatedShapeKind>(generator.next_int(1, o.num_classes + 1));
      const bool bar = candidate.kind == RotatedShapeKind::kBar;
      double long_side = uniform(generator, o.min_object_fraction, o.max_object_fraction) * shorter_side;
      const double aspect = bar ? uniform(generator, o.min_bar_aspect, o.max_bar_aspect)
                                : uniform(generator, 1.0, o.max_aspect);
      double short_side = long_side / aspect;
      if (short_side < o.min_thickness) {  // too thin to see: keep the aspect, lengthen the shape
        short_side = o.min_thickness;
        long_side = short_side * aspect;
      }
      // Uniform in [-pi/2, pi/2): pi * u < pi for u < 1, and the sum rounds below pi/2 (the guard is for
      // the reader, it never fires).
      double angle = -kPi / 2 + kPi * generator.next_uniform();
      if (angle >= kPi / 2) angle -= kPi;
      RotatedBox& box = candidate.box;
      box.w = long_side;  // long edge first: w >= h
      box.h = short_side;
      box.angle = angle;
      // The axis-aligned half-extents of the rotated box; the centre is uniform over the positions that keep
      // them (and so every corner) `margin` inside the image.
      const double extent_x = std::abs(box.w / 2 * std::cos(angle)) + std::abs(box.h / 2 * std::sin(angle));
      const double extent_y = std::abs(box.w / 2 * std::sin(angle)) + std::abs(box.h / 2 * std::cos(angle));
      const double room_x = width - 2 * (extent_x + o.margin), room_y = height - 2 * (extent_y + o.margin);
      const double u_x = generator.next_uniform(), u_y = generator.next_uniform();  // drawn even if unused
      if (room_x < 0 || room_y < 0) continue;  // does not fit at this angle: redraw
      box.cx = extent_x + o.margin + room_x * u_x;
      box.cy = extent_y + o.margin + room_y * u_y;
      if (!inside_image(box, width, height, o.margin)) continue;
      if (!placed.empty()) {
        const std::vector<double> iou =
            box_iou_rotated(rotated_boxes_tensor({box}, kFloat64), rotated_boxes_tensor(placed, kFloat64))
                .to_vector<double>();
        if (*std::max_element(iou.begin(), iou.end()) > o.max_overlap_iou) continue;
      }
      candidate.mask = candidate.kind == RotatedShapeKind::kEllipse
                           ? rasterize_rotated_ellipse(box.cx, box.cy, box.w, box.h, box.angle, o.image_width,
                                                       o.image_height)
                           : rasterize_rotated_rectangle(box.cx, box.cy, box.w, box.h, box.angle, o.image_width,
                                                         o.image_height);
      if (candidate.mask.count() == 0) continue;
      candidate.label = static_cast<int64_t>(candidate.kind);
      candidate.color = contrasting_color(generator, layout.background);
      placed.push_back(box);
      layout.objects.push_back(std::move(candidate));
      break;
    }
  }
  // Larger first, so that what is painted later (and may cover) is always the smaller object.
  std::stable_sort(layout.objects.begin(), layout.objects.end(), [](const RotatedShapeObject& a,
                                                                    const RotatedShapeObject& b) {
    return a.box.area() > b.box.area();
  });
  return layout;
}

Target RotatedShapesDataset::target(int64_t index) const {
  const RotatedShapesLayout shapes = layout(index);
  Target target{index + 1, options_.image_width, options_.image_height, {}, {}, {}};
  for (const RotatedShapeObject& object : shapes.objects) {
    target.boxes.push_back(bounding_box(object.box));
    target.labels.push_back(object.label);
    target.rotated_boxes.push_back(object.box);
  }
  return target;
}

Sample RotatedShapesDataset::get(int64_t index) const {
  const RotatedShapesLayout shapes = layout(index);
  Sample sample;
  sample.image_id = index + 1;
  sample.image = Image(options_.image_width, options_.image_height, shapes.background);
  for (const RotatedShapeObject& object : shapes.objects) {
    paint_mask(sample.image, object.mask, object.color);
    sample.boxes.push_back(bounding_box(object.box));
    sample.labels.push_back(object.label);
    sample.rotated_boxes.push_back(object.box);
  }
  add_uniform_noise(sample.image, options_.noise_amplitude, image_seed(index));
  return sample;
}

}  // namespace minidet::data
