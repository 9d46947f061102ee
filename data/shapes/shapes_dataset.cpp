#include "data/shapes/shapes_dataset.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "core/generator.h"
#include "data/shapes/paint.h"

namespace minidet::data {

const char* split_name(Split split) { return split == Split::kTrain ? "train" : "test"; }

ShapesDataset::ShapesDataset(Split split, ShapesOptions options) : split_(split), options_(options) {
  const ShapesOptions& o = options_;
  MINIDET_CHECK(o.image_width >= 16 && o.image_height >= 16, "ShapesDataset: images must be at least 16x16, got ",
                o.image_width, "x", o.image_height);
  MINIDET_CHECK(o.num_classes >= 1 && o.num_classes <= kNumShapeKinds, "ShapesDataset: num_classes must be in 1..",
                kNumShapeKinds, ", got ", o.num_classes);
  MINIDET_CHECK(o.max_objects >= 0, "ShapesDataset: max_objects must be >= 0, got ", o.max_objects);
  MINIDET_CHECK(o.empty_fraction >= 0 && o.empty_fraction <= 1, "ShapesDataset: empty_fraction must be in [0, 1], got ",
                o.empty_fraction);
  MINIDET_CHECK(o.min_object_fraction > 0 && o.min_object_fraction <= o.max_object_fraction &&
                    o.max_object_fraction <= 1,
                "ShapesDataset: need 0 < min_object_fraction <= max_object_fraction <= 1, got ",
                o.min_object_fraction, " and ", o.max_object_fraction);
  MINIDET_CHECK(o.noise_amplitude >= 0 && o.noise_amplitude <= 255,
                "ShapesDataset: noise_amplitude must be in 0..255, got ", o.noise_amplitude);
  MINIDET_CHECK(o.train_images >= 0 && o.test_images >= 0, "ShapesDataset: negative split size");
}

int64_t ShapesDataset::size() const {
  return split_ == Split::kTrain ? options_.train_images : options_.test_images;
}

std::vector<std::string> ShapesDataset::class_names() const {
  std::vector<std::string> names;
  for (int64_t label = 1; label <= options_.num_classes; ++label)
    names.push_back(shape_kind_name(static_cast<ShapeKind>(label)));
  return names;
}

void ShapesDataset::check_index(int64_t index) const {
  MINIDET_CHECK(index >= 0 && index < size(), "ShapesDataset (", split_name(split_), "): index ", index,
                " is outside [0, ", size(), ")");
}

uint64_t ShapesDataset::image_seed(int64_t index) const {
  const uint64_t split_tag = split_ == Split::kTrain ? 0x7472616eull : 0x74657374ull;  // "tran", "test"
  return mix_seed(mix_seed(mix_seed(options_.seed) ^ split_tag) ^ static_cast<uint64_t>(index));
}

ShapesLayout ShapesDataset::layout(int64_t index) const {
  check_index(index);
  const ShapesOptions& o = options_;
  Generator generator(image_seed(index));
  ShapesLayout layout;
  layout.background = random_color(generator);

  const bool empty = generator.next_uniform() < o.empty_fraction;
  const int64_t wanted = (empty || o.max_objects == 0) ? 0 : generator.next_int(1, o.max_objects + 1);
  const double shorter_side = static_cast<double>(std::min(o.image_width, o.image_height));
  for (int64_t object = 0; object < wanted; ++object) {
    for (int attempt = 0; attempt < kPlacementAttempts; ++attempt) {
      ShapeObject candidate;
      ShapeGeometry& shape = candidate.geometry;
      shape.kind = static_cast<ShapeKind>(generator.next_int(1, o.num_classes + 1));
      const double fraction =
          o.min_object_fraction + (o.max_object_fraction - o.min_object_fraction) * generator.next_uniform();
      shape.size = fraction * shorter_side;
      shape.center_x = shape.size / 2 + (static_cast<double>(o.image_width) - shape.size) * generator.next_uniform();
      shape.center_y = shape.size / 2 + (static_cast<double>(o.image_height) - shape.size) * generator.next_uniform();
      shape.orientation = static_cast<int>(generator.next_int(0, 4));
      candidate.mask = rasterize_shape(shape, o.image_width, o.image_height);
      if (candidate.mask.count() == 0) continue;
      candidate.box = tight_box(candidate.mask);
      const bool overlaps = std::any_of(layout.objects.begin(), layout.objects.end(), [&](const ShapeObject& placed) {
        return box_iou(placed.box, candidate.box) > o.max_overlap_iou;
      });
      if (overlaps) continue;
      candidate.label = static_cast<int64_t>(shape.kind);
      candidate.color = contrasting_color(generator, layout.background);
      layout.objects.push_back(std::move(candidate));
      break;
    }
  }
  // Larger first, so that what is painted later (and may cover) is always the smaller object.
  std::stable_sort(layout.objects.begin(), layout.objects.end(),
                   [](const ShapeObject& a, const ShapeObject& b) { return a.box.area() > b.box.area(); });
  return layout;
}

Target ShapesDataset::target(int64_t index) const {
  const ShapesLayout shapes = layout(index);
  Target target{index + 1, options_.image_width, options_.image_height, {}, {}, {}};
  for (const ShapeObject& object : shapes.objects) {
    target.boxes.push_back(object.box);
    target.labels.push_back(object.label);
  }
  return target;
}

Sample ShapesDataset::get(int64_t index) const {
  const ShapesLayout shapes = layout(index);
  Sample sample;
  sample.image_id = index + 1;  // COCO ids start at 1
  sample.image = Image(options_.image_width, options_.image_height, shapes.background);
  for (const ShapeObject& object : shapes.objects) {
    paint_mask(sample.image, object.mask, object.color);
    sample.boxes.push_back(object.box);
    sample.labels.push_back(object.label);
  }
  add_uniform_noise(sample.image, options_.noise_amplitude, image_seed(index));
  return sample;
}

}  // namespace minidet::data
