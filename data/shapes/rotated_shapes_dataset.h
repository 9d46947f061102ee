// The synthetic rotated-shapes dataset: procedurally drawn images of rotated rectangles, rotated ellipses
// and long thin bars (like lines of text), each with its exact rotated box, for training and testing a
// rotated detector (RRPN-style, box_type = "rotated") without downloading anything.
//
// Rotated boxes are rows (cx, cy, w, h, a) in the convention of ops/box_iou_rotated/box_iou_rotated.h:
// a in radians, counter-clockwise on screen (image y points down), the box's x axis along (cos a, -sin a),
// corners (cx, cy) ± (w/2)(cos a, -sin a) ± (h/2)(sin a, cos a), and a in the normalised range
// [-pi/2, pi/2) of models/box_coder/rotated_box_coder.h. The angle is drawn inside that range directly
// (data/ may not include models/, where normalize_angle lives). The boxes are written long edge first,
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
// Why not a Dataset (data/dataset/dataset.h): Sample and Batch carry (M, 4) axis-aligned boxes, collate
// stacks exactly those and horizontal_flip mirrors exactly those. Rather than widen them now (the loader is
// shared by every run), this dataset stands beside them with its own get() returning a RotatedSample: the
// image, the (M, 5) rotated boxes (RotatedBox rows; rotated_boxes_tensor makes the tensor) and the labels.
// What the loader needs next, to load it through the same DataLoader: Sample gains a
// std::vector<RotatedBox> rotated_boxes (empty for axis-aligned datasets) and RotatedBox moves to
// data/box/; check_sample checks them (count = labels, finite, w, h > 0); collate and to_device carry them
// as Batch::rotated_boxes, per image (M_i, 5) float32, as they carry boxes; horizontal_flip maps
// (cx, cy, w, h, a) to (W - cx, cy, w, h, -a) normalised (-(-pi/2) = pi/2 must wrap back to -pi/2, so
// data/ needs the scalar normalize_angle, which lives in models/box_coder: moving it to ops/ would serve
// both); then this class derives from Dataset, with get() filling boxes with each rotated box's axis-aligned
// hull (for the existing evaluators and COCO export) and rotated_boxes with the exact boxes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/image/image.h"
#include "data/shapes/rasterize.h"
#include "data/shapes/shapes_dataset.h"  // Split

namespace minidet::data {

enum class RotatedShapeKind { kRectangle = 1, kEllipse = 2, kBar = 3 };
constexpr int kNumRotatedShapeKinds = 3;
const char* rotated_shape_kind_name(RotatedShapeKind kind);

// A rotated box (cx, cy, w, h, a), see above.
struct RotatedBox {
  double cx = 0, cy = 0, w = 0, h = 0, angle = 0;

  double area() const { return w * h; }
  // The four corners in the order of ops/box_iou_rotated (counter-clockwise on screen): c - u - v, c + u - v,
  // c + u + v, c - u + v, with u = (w/2)(cos a, -sin a) and v = (h/2)(sin a, cos a); as {x0, y0, x1, y1, ...}.
  std::vector<double> corners() const;
  bool operator==(const RotatedBox& other) const {
    return cx == other.cx && cy == other.cy && w == other.w && h == other.h && angle == other.angle;
  }
  bool operator!=(const RotatedBox& other) const { return !(*this == other); }
};

// (M, 5) rows (cx, cy, w, h, a), float32 by default: the form box_iou_rotated and a rotated detector read.
Tensor rotated_boxes_tensor(const std::vector<RotatedBox>& boxes, const TensorOptions& options = {});

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

// One image with its objects: boxes (M, 5) as rows, labels 1..3 (one per box).
struct RotatedSample {
  Image image;
  std::vector<RotatedBox> boxes;
  std::vector<int64_t> labels;
  int64_t image_id = 0;  // index + 1, as ShapesDataset

  Tensor boxes_tensor(const TensorOptions& options = {}) const { return rotated_boxes_tensor(boxes, options); }
};

class RotatedShapesDataset {
 public:
  static constexpr int kPlacementAttempts = 30;

  explicit RotatedShapesDataset(Split split, RotatedShapesOptions options = {});

  int64_t size() const;
  // Thread-safe (const, no shared state), like Dataset::get.
  RotatedSample get(int64_t index) const;
  std::vector<std::string> class_names() const;
  int64_t num_classes() const { return options_.num_classes; }

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
