// Drawing boxes and text on an Image, to look at what a detector sees and predicts.
//
// Primitives work in integer pixels and clip to the image, so a box partly (or wholly) outside is safe.
// draw_detections is the picture the examples save: the image enlarged by an integer zoom (nearest
// neighbour, so small 64x64 images stay readable), ground-truth boxes in white, each prediction in its
// class's colour with a "name score" tag above it.
#pragma once

#include <string>
#include <vector>

#include "data/box/box.h"
#include "data/image/image.h"

namespace minidet::data {

// The pixels [x1, x2) x [y1, y2), clipped to the image.
void fill_rect(Image& image, int64_t x1, int64_t y1, int64_t x2, int64_t y2, Color color);
// The outline of `box` (continuous coordinates), `thickness` pixels wide, drawn inside the box.
void draw_box(Image& image, const Box& box, Color color, int thickness = 1);
// Text with its top-left corner at (x, y); each font pixel becomes a scale x scale square.
void draw_text(Image& image, int64_t x, int64_t y, const std::string& text, Color ink, int scale = 1);
int64_t text_width(const std::string& text, int scale = 1);
// Nearest-neighbour enlargement by an integer factor.
Image zoom_image(const Image& image, int factor);
// A distinct, saturated colour for class `label` (labels 1..C; any integer works).
Color class_color(int64_t label);

struct LabelledBoxes {
  std::vector<Box> boxes;
  std::vector<int64_t> labels;  // 1..C, indexes class_names[label - 1]
  std::vector<double> scores;   // empty for ground truth
};

struct DrawOptions {
  int zoom = 0;              // 0: the smallest factor that makes the longer side at least 256 pixels
  double min_score = 0.0;    // predictions below it are left out
  int thickness = 2;         // box outline width, in zoomed pixels
};

Image draw_detections(const Image& image, const LabelledBoxes& ground_truth, const LabelledBoxes& predictions,
                      const std::vector<std::string>& class_names, const DrawOptions& options = {});

}  // namespace minidet::data
