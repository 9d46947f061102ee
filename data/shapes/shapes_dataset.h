// The synthetic shapes dataset: procedurally drawn images of squares, circles, triangles, crosses and rings
// with exact boxes, for training and testing a detector without downloading anything.
//
// Every image is a pure function of (seed, split, index): its own Generator is seeded from those three
// numbers, so get(i) is random access, independent of the order images are asked for, and identical on every
// machine (the Generator and the rasterizer use only portable arithmetic; see data/shapes/rasterize.h).
// The train and test splits use different streams, so they never share an image.
//
// One image, step by step:
//   1. a random background colour;
//   2. with probability empty_fraction no object, else 1..max_objects objects;
//   3. each object: a random class among the first num_classes shapes, a size between min_object_fraction and
//      max_object_fraction of the shorter image side, a position keeping it inside the image, and (for the
//      triangle) one of four orientations. A placement whose box has IoU > max_overlap_iou with an earlier
//      object is redrawn (up to kPlacementAttempts times, then the object is dropped);
//   4. a random colour for each object, far enough from the background to be seen;
//   5. objects are painted largest box first, so a smaller object is never hidden under a larger one;
//   6. uniform noise in [-noise_amplitude, noise_amplitude] on every channel of every pixel.
//
// Boxes are the tight box of each object's whole mask, [min_x, min_y, max_x + 1, max_y + 1]: where a later
// (smaller) object covers part of an earlier one, the earlier box still spans its full shape (an amodal box,
// like COCO's). Labels are 1 = square, 2 = circle, 3 = triangle, 4 = cross, 5 = ring.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset/dataset.h"
#include "data/shapes/rasterize.h"

namespace minidet::data {

enum class Split { kTrain, kTest };
const char* split_name(Split split);

struct ShapesOptions {
  int64_t image_width = 64;   // 64 and 128 are the usual sizes; at least 16
  int64_t image_height = 64;
  int64_t num_classes = 3;    // the first num_classes of square, circle, triangle, cross, ring
  int64_t max_objects = 4;
  double empty_fraction = 0.05;
  double min_object_fraction = 0.10;  // object size relative to the shorter image side
  double max_object_fraction = 0.50;
  double max_overlap_iou = 0.3;
  int noise_amplitude = 24;   // per channel, in 0..255 units; 0 gives clean images
  uint64_t seed = 0;
  int64_t train_images = 1000;
  int64_t test_images = 200;
};

// One object of an image, before painting.
struct ShapeObject {
  ShapeGeometry geometry;
  Color color;
  Mask mask;
  Box box;        // tight_box(mask)
  int64_t label;  // = static_cast<int64_t>(geometry.kind)
};

struct ShapesLayout {
  Color background;
  std::vector<ShapeObject> objects;  // in painting order: larger boxes first
};

class ShapesDataset : public Dataset {
 public:
  static constexpr int kPlacementAttempts = 30;

  explicit ShapesDataset(Split split, ShapesOptions options = {});

  int64_t size() const override;
  Sample get(int64_t index) const override;
  Target target(int64_t index) const override;  // no painting, no noise
  std::vector<std::string> class_names() const override;

  // The objects of image `index` with their masks, as get() paints them.
  ShapesLayout layout(int64_t index) const;
  const ShapesOptions& options() const { return options_; }
  Split split() const { return split_; }

 private:
  // The seed of image `index`'s own generator.
  uint64_t image_seed(int64_t index) const;
  void check_index(int64_t index) const;

  Split split_;
  ShapesOptions options_;
};

}  // namespace minidet::data
