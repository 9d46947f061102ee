// Drawing rotated boxes (data/image/draw.h): polygons through their corners, and draw_detections with
// rotated ground truth and predictions.
#include <cmath>

#include "data/image/draw.h"
#include "tests/support.h"

using namespace minidet::data;

namespace {

constexpr double kPi = 3.14159265358979323846;
const Color kRed{255, 0, 0};

int64_t count_color(const Image& image, Color color) {
  int64_t count = 0;
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x) count += image.color_at(x, y) == color ? 1 : 0;
  return count;
}

}  // namespace

TEST_CASE("values/draw: a polygon joins its points and closes back to the first") {
  Image image(20, 20);
  // A triangle through pixel centres (2.5, 2.5), (15.5, 2.5), (2.5, 15.5): pixels (2, 2), (15, 2), (2, 15).
  draw_polygon(image, {2.5, 2.5, 15.5, 2.5, 2.5, 15.5}, kRed);
  for (int64_t x = 2; x <= 15; ++x) CHECK(image.color_at(x, 2) == kRed);  // the first edge
  for (int64_t y = 2; y <= 15; ++y) CHECK(image.color_at(2, y) == kRed);  // the closing edge
  CHECK(image.color_at(8, 9) == kRed);                                     // the diagonal (x + y = 17)
  CHECK(image.color_at(6, 6) == Color{});                                  // outline only
  Image untouched(8, 8);
  draw_polygon(untouched, {1, 1, NAN, 2, 3, 3}, kRed);  // a non-finite point draws nothing
  draw_polygon(untouched, {-1e30, -1e30, 1e30, -1e30}, kRed);  // far away: clipped, no crash
  CHECK(count_color(untouched, kRed) == 0);
}

TEST_CASE("values/draw: a rotated box is outlined through its four corners") {
  Image image(40, 40);
  // A 20 x 20 square at 45 degrees about (20, 20): corners 14.14 from the centre along the axes.
  draw_rotated_box(image, {20, 20, 20, 20, kPi / 4}, kRed);
  // The right corner (34.1, 20 +- rounding) and the top one (20 +- rounding, 5.9): pixel centres 19.5 or 20.5
  // are equally near, so either row (column) may hold them.
  CHECK((image.color_at(34, 19) == kRed || image.color_at(34, 20) == kRed));
  CHECK((image.color_at(19, 5) == kRed || image.color_at(20, 5) == kRed));
  CHECK(image.color_at(20, 20) == Color{});
  CHECK(image.color_at(5, 5) == Color{});  // the bounding box's corner is not drawn
  // At angle 0: corners (6, 7), (14, 7), (14, 13), (6, 13) go to the pixels of the nearest centres.
  Image square(20, 20);
  draw_rotated_box(square, {10, 10, 8, 6, 0}, kRed);
  CHECK(square.color_at(6, 7) == kRed);   // the top-left corner
  CHECK(square.color_at(14, 13) == kRed);  // the bottom-right corner
  CHECK(square.color_at(10, 7) == kRed);  // the top edge
  CHECK(square.color_at(10, 10) == Color{});
}

TEST_CASE("values/draw: draw_detections draws rotated outlines, not their bounding boxes") {
  Image image(64, 64);
  const RotatedBox bar{32, 32, 40, 6, 0.5};
  const LabelledBoxes truth{{bounding_box(bar)}, {1}, {}, {bar}};
  const LabelledBoxes none{};
  DrawOptions options;
  options.zoom = 4;
  const Image rotated = draw_detections(image, truth, none, {"bar"}, options);
  const LabelledBoxes boxes_only{{bounding_box(bar)}, {1}, {}};
  const Image axis_aligned = draw_detections(image, boxes_only, none, {"bar"}, options);
  const Color white{255, 255, 255};
  const Box corner = bounding_box(bar);
  // The bounding box's top-right corner (zoomed): outlined by the box, empty for the bar.
  const auto x = static_cast<int64_t>(std::ceil(corner.x2 * 4)) - 1, y = static_cast<int64_t>(corner.y1 * 4);
  CHECK(axis_aligned.color_at(x, y) == white);
  CHECK(rotated.color_at(x, y) == Color{});
  CHECK(count_color(rotated, white) > 0);
  const LabelledBoxes wrong{{bounding_box(bar)}, {1}, {}, {bar, bar}};
  CHECK_THROWS_CONTAINING(draw_detections(image, wrong, none, {"bar"}),
                          "draw_detections: ground truth has 1 boxes but 2 rotated boxes");
}
