#include "data/dataset/dataset.h"

#include <cstdio>

#include "core/error.h"

namespace minidet::data {

Target Dataset::target(int64_t index) const {
  Sample sample = get(index);
  return {sample.image_id, sample.image.width, sample.image.height, std::move(sample.boxes),
          std::move(sample.labels), std::move(sample.rotated_boxes)};
}

std::string Dataset::file_name(int64_t index) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%012lld.png", static_cast<long long>(target(index).image_id));
  return name;
}

void check_sample(const Sample& sample, int64_t num_classes, const std::string& where) {
  MINIDET_CHECK(sample.boxes.size() == sample.labels.size(), where, ": ", sample.boxes.size(), " boxes but ",
                sample.labels.size(), " labels");
  MINIDET_CHECK(static_cast<int64_t>(sample.image.pixels.size()) ==
                    sample.image.width * sample.image.height * Image::kChannels,
                where, ": pixel buffer does not match the ", sample.image.width, "x", sample.image.height,
                " image");
  for (size_t i = 0; i < sample.boxes.size(); ++i) {
    MINIDET_CHECK(sample.labels[i] >= 1 && sample.labels[i] <= num_classes, where, ": label ",
                  sample.labels[i], " of box ", i, " is outside 1..", num_classes);
    MINIDET_CHECK(is_finite(sample.boxes[i]), where, ": box ", i, " is not finite: ", sample.boxes[i]);
  }
  if (sample.rotated_boxes.empty()) return;
  MINIDET_CHECK(sample.rotated_boxes.size() == sample.labels.size(), where, ": ", sample.rotated_boxes.size(),
                " rotated boxes but ", sample.labels.size(), " labels");
  for (size_t i = 0; i < sample.rotated_boxes.size(); ++i) {
    const RotatedBox& box = sample.rotated_boxes[i];
    MINIDET_CHECK(is_finite(box) && box.w > 0 && box.h > 0, where, ": rotated box ", i,
                  " must be finite with positive width and height, got ", box);
  }
}

}  // namespace minidet::data
