#include "data/image/draw.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "data/image/font.h"

namespace minidet::data {

void fill_rect(Image& image, int64_t x1, int64_t y1, int64_t x2, int64_t y2, Color color) {
  x1 = std::max<int64_t>(x1, 0);
  y1 = std::max<int64_t>(y1, 0);
  x2 = std::min(x2, image.width);
  y2 = std::min(y2, image.height);
  for (int64_t y = y1; y < y2; ++y)
    for (int64_t x = x1; x < x2; ++x) image.set(x, y, color);
}

// Liang-Barsky: the segment is start + t (end - start) for t in [0, 1]; each edge of the rectangle bounds t
// from below (where the segment enters) or above (where it leaves).
bool clip_segment(double& x1, double& y1, double& x2, double& y2, double x_min, double y_min, double x_max,
                  double y_max) {
  const double dx = x2 - x1, dy = y2 - y1;
  double t_enter = 0.0, t_leave = 1.0;
  // Each pair (p, q) is one edge: the segment is inside that edge where p * t <= q.
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {x1 - x_min, x_max - x1, y1 - y_min, y_max - y1};
  for (int edge = 0; edge < 4; ++edge) {
    if (p[edge] == 0.0) {
      if (q[edge] < 0.0) return false;  // parallel to this edge and outside it
      continue;
    }
    const double t = q[edge] / p[edge];
    if (p[edge] < 0.0)
      t_enter = std::max(t_enter, t);
    else
      t_leave = std::min(t_leave, t);
  }
  if (t_enter > t_leave) return false;
  const double start_x = x1, start_y = y1;
  x1 = start_x + t_enter * dx;
  y1 = start_y + t_enter * dy;
  x2 = start_x + t_leave * dx;
  y2 = start_y + t_leave * dy;
  return true;
}

void draw_line(Image& image, int64_t x1, int64_t y1, int64_t x2, int64_t y2, Color color, int thickness) {
  if (image.empty() || thickness < 1) return;
  // Cut to the image grown by the thickness, so squares of pixels just outside still paint their inner part.
  double ax = static_cast<double>(x1), ay = static_cast<double>(y1);
  double bx = static_cast<double>(x2), by = static_cast<double>(y2);
  const double margin = thickness;
  if (!clip_segment(ax, ay, bx, by, -margin, -margin, static_cast<double>(image.width - 1) + margin,
                    static_cast<double>(image.height - 1) + margin))
    return;
  x1 = std::llround(ax), y1 = std::llround(ay), x2 = std::llround(bx), y2 = std::llround(by);
  const int64_t before = (thickness - 1) / 2;
  // Bresenham over all octants: step along both axes, with `error` tracking which one is due next.
  const int64_t dx = std::abs(x2 - x1), dy = -std::abs(y2 - y1);
  const int64_t step_x = x1 < x2 ? 1 : -1, step_y = y1 < y2 ? 1 : -1;
  int64_t error = dx + dy;
  for (int64_t x = x1, y = y1;;) {
    if (thickness == 1) {
      if (image.contains(x, y)) image.set(x, y, color);
    } else {
      fill_rect(image, x - before, y - before, x - before + thickness, y - before + thickness, color);
    }
    if (x == x2 && y == y2) break;
    const int64_t twice = 2 * error;
    if (twice >= dy) {
      error += dy;
      x += step_x;
    }
    if (twice <= dx) {
      error += dx;
      y += step_y;
    }
  }
}

void draw_box(Image& image, const Box& box, Color color, int thickness) {
  if (!is_finite(box)) return;
  // Pixel columns that the continuous box touches: [floor(x1), ceil(x2)).
  const auto left = static_cast<int64_t>(std::floor(box.x1));
  const auto top = static_cast<int64_t>(std::floor(box.y1));
  const auto right = std::max(left + 1, static_cast<int64_t>(std::ceil(box.x2)));
  const auto bottom = std::max(top + 1, static_cast<int64_t>(std::ceil(box.y2)));
  fill_rect(image, left, top, right, top + thickness, color);
  fill_rect(image, left, bottom - thickness, right, bottom, color);
  fill_rect(image, left, top, left + thickness, bottom, color);
  fill_rect(image, right - thickness, top, right, bottom, color);
}

void draw_polygon(Image& image, const std::vector<double>& points, Color color, int thickness) {
  for (double value : points)
    if (!std::isfinite(value)) return;
  // The pixel whose centre (c + 0.5) is nearest. llround needs a value that fits int64, hence the clamp;
  // draw_line clips what lies outside the image.
  const auto pixel = [](double v) { return std::llround(std::clamp(v - 0.5, -4e18, 4e18)); };
  const size_t count = points.size() / 2;
  for (size_t k = 0; k < count; ++k) {
    const size_t next = (k + 1) % count;
    draw_line(image, pixel(points[2 * k]), pixel(points[2 * k + 1]), pixel(points[2 * next]),
              pixel(points[2 * next + 1]), color, thickness);
  }
}

void draw_rotated_box(Image& image, const RotatedBox& box, Color color, int thickness) {
  draw_polygon(image, box.corners(), color, thickness);
}

void draw_text(Image& image, int64_t x, int64_t y, const std::string& text, Color ink, int scale) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto& rows = glyph_rows(text[i]);
    const int64_t glyph_x = x + static_cast<int64_t>(i) * kGlyphAdvance * scale;
    for (int row = 0; row < kGlyphHeight; ++row)
      for (int column = 0; column < kGlyphWidth; ++column)
        if (rows[row] & (1u << (4 - column)))
          fill_rect(image, glyph_x + column * scale, y + row * scale, glyph_x + (column + 1) * scale,
                    y + (row + 1) * scale, ink);
  }
}

int64_t text_width(const std::string& text, int scale) {
  return text.empty() ? 0 : (static_cast<int64_t>(text.size()) * kGlyphAdvance - 1) * scale;
}

Image zoom_image(const Image& image, int factor) {
  MINIDET_CHECK(factor >= 1, "zoom_image: factor must be at least 1, got ", factor);
  Image zoomed(image.width * factor, image.height * factor);
  for (int64_t y = 0; y < zoomed.height; ++y)
    for (int64_t x = 0; x < zoomed.width; ++x) zoomed.set(x, y, image.color_at(x / factor, y / factor));
  return zoomed;
}

Color class_color(int64_t label) {
  static const Color kPalette[] = {{230, 25, 75},  {60, 180, 75},  {0, 130, 200},  {245, 130, 48},
                                   {145, 30, 180}, {70, 240, 240}, {240, 50, 230}, {210, 245, 60},
                                   {250, 190, 212}, {0, 128, 128}, {170, 110, 40}, {255, 225, 25}};
  const int64_t count = static_cast<int64_t>(sizeof(kPalette) / sizeof(kPalette[0]));
  return kPalette[((label % count) + count) % count];
}

namespace {

Box scaled(const Box& box, int zoom) { return {box.x1 * zoom, box.y1 * zoom, box.x2 * zoom, box.y2 * zoom}; }
RotatedBox scaled(const RotatedBox& box, int zoom) {
  return {box.cx * zoom, box.cy * zoom, box.w * zoom, box.h * zoom, box.angle};
}

// The outline of entry i: its rotated box when the list has them, else its box.
void draw_outline(Image& canvas, const LabelledBoxes& boxes, size_t i, int zoom, Color color, int thickness) {
  if (boxes.rotated_boxes.empty())
    draw_box(canvas, scaled(boxes.boxes[i], zoom), color, thickness);
  else
    draw_rotated_box(canvas, scaled(boxes.rotated_boxes[i], zoom), color, thickness);
}

std::string class_name(const std::vector<std::string>& class_names, int64_t label) {
  if (label >= 1 && label <= static_cast<int64_t>(class_names.size())) return class_names[label - 1];
  return "class " + std::to_string(label);
}

constexpr int64_t kTagHeight = kGlyphHeight + 2;

// A tag: text on a filled rectangle whose top-left corner is (left, top).
void draw_tag(Image& image, int64_t left, int64_t top, const std::string& text, Color background) {
  fill_rect(image, left, top, left + text_width(text) + 2, top + kTagHeight, background);
  const bool light = background.r * 299 + background.g * 587 + background.b * 114 > 128000;
  draw_text(image, left + 1, top + 1, text, light ? Color{0, 0, 0} : Color{255, 255, 255});
}

}  // namespace

Image draw_detections(const Image& image, const LabelledBoxes& ground_truth, const LabelledBoxes& predictions,
                      const std::vector<std::string>& class_names, const DrawOptions& options) {
  MINIDET_CHECK(ground_truth.boxes.size() == ground_truth.labels.size(),
                "draw_detections: ground truth has ", ground_truth.boxes.size(), " boxes but ",
                ground_truth.labels.size(), " labels");
  MINIDET_CHECK(predictions.boxes.size() == predictions.labels.size() &&
                    predictions.boxes.size() == predictions.scores.size(),
                "draw_detections: predictions need as many labels and scores as boxes, got ",
                predictions.boxes.size(), " boxes, ", predictions.labels.size(), " labels, ",
                predictions.scores.size(), " scores");
  for (const LabelledBoxes* list : {&ground_truth, &predictions})
    MINIDET_CHECK(list->rotated_boxes.empty() || list->rotated_boxes.size() == list->boxes.size(),
                  "draw_detections: ", list == &ground_truth ? "ground truth" : "predictions", " has ",
                  list->boxes.size(), " boxes but ", list->rotated_boxes.size(), " rotated boxes");
  int zoom = options.zoom;
  if (zoom <= 0) {
    const int64_t longer = std::max<int64_t>(1, std::max(image.width, image.height));
    zoom = static_cast<int>(std::max<int64_t>(1, (256 + longer - 1) / longer));
  }
  Image canvas = zoom_image(image, zoom);
  const Color white{255, 255, 255};
  for (size_t i = 0; i < ground_truth.boxes.size(); ++i) {
    const Box box = scaled(ground_truth.boxes[i], zoom);
    draw_outline(canvas, ground_truth, i, zoom, white, 1);
    // Ground-truth tags hang below the box (inside it at the bottom edge), predictions' sit above it.
    auto top = static_cast<int64_t>(std::ceil(box.y2));
    if (top + kTagHeight > canvas.height) top -= kTagHeight;
    draw_tag(canvas, static_cast<int64_t>(std::floor(box.x1)), top,
             class_name(class_names, ground_truth.labels[i]), white);
  }
  for (size_t i = 0; i < predictions.boxes.size(); ++i) {
    if (predictions.scores[i] < options.min_score) continue;
    const Box box = scaled(predictions.boxes[i], zoom);
    const Color color = class_color(predictions.labels[i]);
    draw_outline(canvas, predictions, i, zoom, color, options.thickness);
    char score[16];
    std::snprintf(score, sizeof(score), " %.2f", predictions.scores[i]);
    auto top = static_cast<int64_t>(std::floor(box.y1)) - kTagHeight;
    if (top < 0) top += kTagHeight;
    draw_tag(canvas, static_cast<int64_t>(std::floor(box.x1)), top,
             class_name(class_names, predictions.labels[i]) + score, color);
  }
  return canvas;
}

}  // namespace minidet::data
