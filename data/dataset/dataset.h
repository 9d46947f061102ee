// Dataset: the interface every detection dataset implements (the synthetic shapes, a COCO folder), so the
// loader, the COCO exporter and the evaluators work with any of them.
//
// A sample is one image with its objects:
//   boxes   (x1, y1, x2, y2) in the image's pixels, continuous, width = x2 - x1 (see data/box/box.h);
//   labels  1..C, one per box, indexing class_names()[label - 1]; 0 is reserved for background;
//   image_id a positive id, unique within the dataset, that COCO files and detections refer to.
//   rotated_boxes  (rotated datasets only) the exact oriented box of each object, (cx, cy, w, h, angle) in
//            the convention of data/box/rotated_box.h, one per label; boxes then holds their bounding boxes,
//            so every axis-aligned tool (evaluation, export, drawing) still reads a rotated dataset. Empty for
//            axis-aligned datasets (rotated() false).
// target(i) gives the same annotations without decoding pixels, for evaluation and export of large sets.
//
// get() and target() are const and must be safe to call from two threads at once: the loader builds the
// next batch on a background thread while the caller may still read the dataset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/box/box.h"
#include "data/box/rotated_box.h"
#include "data/image/image.h"

namespace minidet::data {

struct Target {
  int64_t image_id = 0;
  int64_t width = 0;
  int64_t height = 0;
  std::vector<Box> boxes;
  std::vector<int64_t> labels;
  std::vector<RotatedBox> rotated_boxes;  // rotated datasets: one per label; empty otherwise
};

struct Sample {
  Image image;
  std::vector<Box> boxes;
  std::vector<int64_t> labels;
  std::vector<RotatedBox> rotated_boxes;  // rotated datasets: one per label; empty otherwise
  int64_t image_id = 0;
  // Set by horizontal_flip (data/transforms): the image is the dataset's mirrored left-right. The random
  // transform records what it drew here, so a run can write down its flips instead of re-deriving them.
  bool flipped = false;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  virtual Sample get(int64_t index) const = 0;
  // The annotations of get(index) without the pixels. The default decodes the image; override when cheaper.
  virtual Target target(int64_t index) const;
  // Names of classes 1..C, in label order.
  virtual std::vector<std::string> class_names() const = 0;
  // The COCO category id written for `label`; by default the label itself.
  virtual int64_t category_id(int64_t label) const { return label; }
  // Whether samples carry rotated_boxes (every sample then has one per label).
  virtual bool rotated() const { return false; }
  // The image's file name when exported; by default its id, zero-padded, as PNG.
  virtual std::string file_name(int64_t index) const;

  int64_t num_classes() const { return static_cast<int64_t>(class_names().size()); }
};

// Throws when a sample breaks the conventions above (box/label counts, label range, finite boxes; rotated
// boxes, when present, one per label, finite, with positive sides);
// `where` names the dataset and sample in the message.
void check_sample(const Sample& sample, int64_t num_classes, const std::string& where);

}  // namespace minidet::data
