// The synthetic rotated-shapes dataset: procedurally drawn images of rotated rectangles, rotated ellipses
// and long thin bars (like lines of text), each with its exact rotated box, for training and testing a
// rotated detector (RRPN-style, box_type = "rotated") without downloading anything.
//
// Rotated boxes are data::RotatedBox (data/box/rotated_box.h): (cx, cy, w, h, a), a in radians,
// counter-clockwise on screen (image y points down), the box's x axis along (cos a, -sin a), corners
// (cx, cy) ± (w/2)(cos a, -sin a) ± (h/2)(sin a, cos a), a in the normalised range [-pi/2, pi/2) (drawn
// inside it directly). The boxes are written long edge first,
// w >= h, so each shape has exactly one box (a rectangle of w x h at a is also h x w at a ± pi/2; this
// dataset never writes the second form). Labels: 1 = rectangle, 2 = ellipse, 3 = bar.
//   rectangle  the box itself, long side / short side in [1, max_aspect];
//   ellipse    the ellipse inscribed in its box: axes w and h along the box's axes, same aspects;
//   bar        a rectangle with long side / short side in [min_bar_aspect, max_bar_aspect] (4 to 10 by
//              default), at least min_thickness pixels thick: a text line.
//
// Like ShapesDataset (data/shapes/shapes_dataset.h), every image is a pure function of (seed, split, index):
// its own Generator is seeded from those three, so get(i) is random access and the same on every machine
// (up to the last bit of sin and cos, see rasterize.h); the train and test splits use different streams.
//
// One image, step by step:
//   1. a random background colour;
//   2. with probability empty_fraction no object, else 1..max_objects objects;
//   3. each object: a class among the first num_classes, a long side between min_object_fraction and
//      max_object_fraction of the shorter image side (lengthened where the short side would be thinner
//      than min_thickness), an aspect, an angle uniform in [-pi/2, pi/2), and a
//      centre uniform among those that keep all four corners of the box at least `margin` pixels inside
//      the image. A placement whose rotated box has IoU > max_overlap_iou (ops/box_iou_rotated) with an
//      earlier object's, or that does not fit, is redrawn (up to kPlacementAttempts times, then the object
//      is dropped);
//   4. a random colour per object, far enough from the background to be seen;
//   5. objects are painted largest box first, so a smaller one is never hidden under a larger one;
//   6. uniform noise in [-noise_amplitude, noise_amplitude] on every channel of every pixel.
// The box is the shape's geometric box, not the tight box of its pixels: a pixel is painted when its centre
// lies inside the shape (rasterize.h), so every painted pixel centre of a rectangle or bar is inside its box.
//
// A Dataset (data/dataset/dataset.h) like any other: get(i).rotated_boxes holds the exact boxes, get(i).boxes
// their axis-aligned bounding boxes, so the loader, the axis-aligned evaluators and the COCO export read it
// as they read ShapesDataset, and a rotated detector reads the rotated boxes (data::Batch::rotated_boxes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/box/rotated_box.h"
#include "data/dataset/dataset.h"
#include "data/image/image.h"
#include "data/shapes/rasterize.h"
#include "data/shapes/shapes_dataset.h"  // Split

namespace minidet::data {

enum class RotatedShapeKind { kRectangle = 1, kEllipse = 2, kBar = 3 };
constexpr int kNumRotatedShapeKinds = 3;
const char* rotated_shape_kind_name(RotatedShapeKind kind);

struct RotatedShapesOptions {
  int64_t image_width = 64;   // at least 16
  int64_t image_height = 64;
  int64_t num_classes = 3;    // the first num_classes of rectangle, ellipse, bar
  int64_t max_objects = 4;
  double empty_fraction = 0.05;
  double min_object_fraction = 0.15;  // the long side relative to the shorter image side
  double max_object_fraction = 0.60;
  double max_aspect = 2.5;            // rectangles and ellipses: long / short in [1, max_aspect]
  double min_bar_aspect = 4.0;        // bars: long / short in [min_bar_aspect, max_bar_aspect]
  double max_bar_aspect = 10.0;
  double min_thickness = 2.0;         // the shortest short side, in pixels (a thinner draw is lengthened,
                                      // its aspect kept, so long sides may pass max_object_fraction)
  double margin = 1.0;                // pixels between every box corner and the image border
  double max_overlap_iou = 0.2;       // rotated IoU between any two objects' boxes
  int noise_amplitude = 24;           // per channel, in 0..255 units; 0 gives clean images
  uint64_t seed = 0;
  int64_t train_images = 1000;
  int64_t test_images = 200;
};

// One object of an image, before painting.
struct RotatedShapeObject {
  RotatedShapeKind kind = RotatedShapeKind::kRectangle;
  RotatedBox box;
  Color color;
  Mask mask;      // the painted pixels (rasterize_rotated_rectangle or _ellipse of box)
  int64_t label = 0;  // = static_cast<int64_t>(kind)
};

struct RotatedShapesLayout {
  Color background;
  std::vector<RotatedShapeObject> objects;  // in painting order: larger boxes first
};

class RotatedShapesDataset final : public Dataset {
 public:
  static constexpr int kPlacementAttempts = 30;

  explicit RotatedShapesDataset(Split split, RotatedShapesOptions options = {});

  int64_t size() const override;
  // Thread-safe (const, no shared state), like Dataset::get.
  Sample get(int64_t index) const override;
  Target target(int64_t index) const override;  // no painting, no noise
  std::vector<std::string> class_names() const override;
  bool rotated() const override { return true; }

  // The objects of image `index` with their masks, as get() paints them.
  RotatedShapesLayout layout(int64_t index) const;
  const RotatedShapesOptions& options() const { return options_; }
  Split split() const { return split_; }

 private:
  uint64_t image_seed(int64_t index) const;
  void check_index(int64_t index) const;

  Split split_;
  RotatedShapesOptions options_;
};

}  // namespace minidet::data
