// Drawing boxes and text on an Image, to look at what a detector sees and predicts.
//
// Primitives work in integer pixels and clip to the image, so a box partly (or wholly) outside is safe.
// draw_detections is the picture the examples save: the image enlarged by an integer zoom (nearest
// neighbour, so small 64x64 images stay readable), ground-truth boxes in white, each prediction in its
// class's colour with a "name score" tag above it. Rotated boxes are drawn as their outlines: lines between
// the four corners (draw_rotated_box).
#pragma once

#include <string>
#include <vector>

#include "data/box/box.h"
#include "data/box/rotated_box.h"
#include "data/image/image.h"

namespace minidet::data {

// The pixels [x1, x2) x [y1, y2), clipped to the image.
void fill_rect(Image& image, int64_t x1, int64_t y1, int64_t x2, int64_t y2, Color color);
// Cuts the segment (x1, y1)-(x2, y2) to the rectangle [x_min, x_max] x [y_min, y_max] in place, in double
// precision so lines to far-away points keep their direction. Returns false when none of it is inside.
bool clip_segment(double& x1, double& y1, double& x2, double& y2, double x_min, double y_min, double x_max,
                  double y_max);
// A straight line from (x1, y1) to (x2, y2), both ends included (Bresenham), clipped to the image. With
// thickness t each line pixel (x, y) becomes the t x t square of columns x - (t-1)/2 .. x + t/2 (rows
// likewise), so thickness 2 grows the line right and down. Far-away ends cost nothing: the segment is cut
// to the image before it is walked.
void draw_line(Image& image, int64_t x1, int64_t y1, int64_t x2, int64_t y2, Color color, int thickness = 1);
// The outline of `box` (continuous coordinates), `thickness` pixels wide, drawn inside the box.
void draw_box(Image& image, const Box& box, Color color, int thickness = 1);
// The closed outline through points {x0, y0, x1, y1, ...} (continuous coordinates): a draw_line from each
// point to the next and from the last back to the first. A point goes to the pixel whose centre is nearest
// (pixel column c has its centre at c + 0.5). Non-finite points draw nothing.
void draw_polygon(Image& image, const std::vector<double>& points, Color color, int thickness = 1);
// The outline of a rotated box: draw_polygon over its four corners (data/box/rotated_box.h).
void draw_rotated_box(Image& image, const RotatedBox& box, Color color, int thickness = 1);
// Text with its top-left corner at (x, y); each font pixel becomes a scale x scale square.
void draw_text(Image& image, int64_t x, int64_t y, const std::string& text, Color ink, int scale = 1);
int64_t text_width(const std::string& text, int scale = 1);
// Nearest-neighbour enlargement by an integer factor.
Image zoom_image(const Image& image, int factor);
// A distinct, saturated colour for class `label` (labels 1..C; any integer works).
Color class_color(int64_t label);

struct LabelledBoxes {
  std::vector<Box> boxes;  // for rotated boxes, their bounding boxes: where the tags go
  std::vector<int64_t> labels;  // 1..C, indexes class_names[label - 1]
  std::vector<double> scores;   // empty for ground truth
  std::vector<RotatedBox> rotated_boxes{};  // empty, or one per box: then drawn as rotated outlines
};

struct DrawOptions {
  int zoom = 0;              // 0: the smallest factor that makes the longer side at least 256 pixels
  double min_score = 0.0;    // predictions below it are left out
  int thickness = 2;         // box outline width, in zoomed pixels
};

Image draw_detections(const Image& image, const LabelledBoxes& ground_truth, const LabelledBoxes& predictions,
                      const std::vector<std::string>& class_names, const DrawOptions& options = {});

}  // namespace minidet::data
