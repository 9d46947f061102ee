// line_plot: the picture's geometry is checked through the frame it draws, found again in the pixels.
#include <cmath>
#include <limits>
#include <set>

#include "data/image/draw.h"
#include "data/image/plot.h"
#include "tests/support.h"

using namespace minidet::data;

namespace {

const Color kBlack{0, 0, 0};
const Color kWhite{255, 255, 255};

// The frame's black lines: the plot area is rows (top, bottom) and columns (left, right), exclusive.
struct FoundFrame {
  int64_t top = -1, bottom = -1, left = -1, right = -1;
  int64_t first_row() const { return top + 1; }
  int64_t last_row() const { return bottom - 1; }
  bool inside(int64_t x, int64_t y) const { return x > left && x < right && y > top && y < bottom; }
};

// Rows more than half black are the frame's top and bottom; columns black all the way between them are its
// sides. Text is never that long, so the first and last such lines are the frame.
FoundFrame find_frame(const Image& image) {
  FoundFrame frame;
  for (int64_t y = 0; y < image.height; ++y) {
    int64_t black = 0;
    for (int64_t x = 0; x < image.width; ++x) black += image.color_at(x, y) == kBlack;
    if (black > image.width / 2) {
      if (frame.top < 0) frame.top = y;
      frame.bottom = y;
    }
  }
  REQUIRE(frame.top >= 0);
  for (int64_t x = 0; x < image.width; ++x) {
    bool all_black = true;
    for (int64_t y = frame.top; y <= frame.bottom && all_black; ++y) all_black = image.color_at(x, y) == kBlack;
    if (all_black) {
      if (frame.left < 0) frame.left = x;
      frame.right = x;
    }
  }
  REQUIRE(frame.left >= 0);
  REQUIRE(frame.bottom - frame.top > 10);
  REQUIRE(frame.right - frame.left > 10);
  return frame;
}

// The rows and the number of pixels where `color` appears; `inside_only` looks in the plot area alone.
std::set<int64_t> rows_with(const Image& image, Color color, const FoundFrame& frame, int64_t* count = nullptr) {
  std::set<int64_t> rows;
  if (count) *count = 0;
  for (int64_t y = frame.top + 1; y < frame.bottom; ++y)
    for (int64_t x = frame.left + 1; x < frame.right; ++x)
      if (image.color_at(x, y) == color) {
        rows.insert(y);
        if (count) ++*count;
      }
  return rows;
}

PlotSeries constant(double value, Color color, int points = 11) {
  PlotSeries series{"constant", {}, {}, color};
  for (int i = 0; i < points; ++i) {
    series.x.push_back(i);
    series.y.push_back(value);
  }
  return series;
}

// The row of `fraction` of the way from the plot's bottom row (0) to its top row (1).
int64_t row_at(const FoundFrame& frame, double fraction) {
  return std::llround(frame.last_row() - fraction * (frame.last_row() - frame.first_row()));
}

}  // namespace

TEST_CASE("values/line_plot: the image has the asked size and a white background") {
  PlotOptions options;
  options.width = 320;
  options.height = 200;
  options.title = "loss";
  const Image image = line_plot({constant(1.0, class_color(1))}, options);
  CHECK(image.width == 320);
  CHECK(image.height == 200);
  CHECK(image.color_at(0, 0) == kWhite);
  CHECK(image.color_at(319, 199) == kWhite);
}

TEST_CASE("values/line_plot: each series' colour is drawn inside the plot area and in the legend") {
  PlotSeries rising{"rising", {0, 1, 2, 3}, {0.0, 0.5, 0.7, 0.9}, class_color(1)};
  PlotSeries falling{"falling", {0, 1, 2, 3}, {2.0, 1.0, 0.5, 0.2}, class_color(2)};
  const Image image = line_plot({rising, falling});
  const FoundFrame frame = find_frame(image);
  int64_t count = 0;
  for (const PlotSeries& series : {rising, falling}) {
    rows_with(image, series.color, frame, &count);
    CHECK(count > 100);
    // The legend's swatch sits above the frame.
    bool in_legend = false;
    for (int64_t y = 0; y < frame.top && !in_legend; ++y)
      for (int64_t x = 0; x < image.width && !in_legend; ++x) in_legend = image.color_at(x, y) == series.color;
    CHECK(in_legend);
  }
}

TEST_CASE("values/line_plot: a constant series draws a horizontal line at the expected row") {
  const Color color = class_color(3);
  SUBCASE("fixed range: 0.25 of 0..1 is a quarter of the way up") {
    PlotOptions options;
    options.y_min = 0.0;
    options.y_max = 1.0;
    const Image image = line_plot({constant(0.25, color)}, options);
    const FoundFrame frame = find_frame(image);
    const int64_t row = row_at(frame, 0.25);
    CHECK(rows_with(image, color, frame) == std::set<int64_t>{row, row + 1});  // 2 pixels thick, growing down
  }
  SUBCASE("automatic range: the value sits in the middle (3 within 2.6..3.4)") {
    const Image image = line_plot({constant(3.0, color)});
    const FoundFrame frame = find_frame(image);
    const int64_t row = row_at(frame, 0.5);
    CHECK(rows_with(image, color, frame) == std::set<int64_t>{row, row + 1});
  }
  SUBCASE("a single point is a dot in the middle") {
    const Image image = line_plot({constant(-7.0, color, 1)});
    const FoundFrame frame = find_frame(image);
    const int64_t row = row_at(frame, 0.5);
    CHECK(rows_with(image, color, frame) == std::set<int64_t>{row - 1, row, row + 1});
  }
}

TEST_CASE("values/line_plot: a log axis places values by their logarithm") {
  const Color color = class_color(4);
  SUBCASE("fixed 1..100: 10 is in the middle") {
    PlotOptions options;
    options.log_y = true;
    options.y_min = 1.0;
    options.y_max = 100.0;
    const Image image = line_plot({constant(10.0, color)}, options);
    const FoundFrame frame = find_frame(image);
    const int64_t row = row_at(frame, 0.5);
    CHECK(rows_with(image, color, frame) == std::set<int64_t>{row, row + 1});
  }
  SUBCASE("automatic: data from 1 to 1000 spans three decades, 10 is a third of the way up") {
    PlotOptions options;
    options.log_y = true;
    PlotSeries span{"span", {0, 1}, {1.0, 1000.0}, class_color(1)};
    // Non-positive values cannot be drawn on a log axis: they break the line instead of throwing.
    PlotSeries ten{"ten", {0, 1, 2, 3}, {10.0, 10.0, 0.0, -5.0}, color};
    const Image image = line_plot({span, ten}, options);
    const FoundFrame frame = find_frame(image);
    const int64_t row = row_at(frame, 1.0 / 3.0);
    CHECK(rows_with(image, color, frame) == std::set<int64_t>{row, row + 1});
  }
}

TEST_CASE("values/line_plot: an empty series list gives the axes only") {
  PlotOptions options;
  options.title = "nothing yet";
  options.y_label = "loss";
  const Image image = line_plot({}, options);
  find_frame(image);
  // Only black, white and the grey grid: no series colour anywhere.
  bool all_grey = true;
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x) {
      const Color c = image.color_at(x, y);
      all_grey = all_grey && c.r == c.g && c.g == c.b;
    }
  CHECK(all_grey);
}

TEST_CASE("values/line_plot: extreme and missing values stay inside the plot area") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Color color = class_color(5);
  auto check_inside = [&](const std::vector<PlotSeries>& series, const PlotOptions& options) {
    const Image image = line_plot(series, options);
    const FoundFrame frame = find_frame(image);
    // The legend swatch is above the frame; everywhere else the colour must be inside it.
    for (int64_t y = frame.top; y < image.height; ++y)
      for (int64_t x = 0; x < image.width; ++x)
        if (image.color_at(x, y) == color) REQUIRE(frame.inside(x, y));
    return image;
  };
  PlotOptions fixed;
  fixed.y_min = 0.0;
  fixed.y_max = 1.0;
  check_inside({{"wild", {0, 1, 2, 3, 4, 5}, {0.5, 1e308, -1e308, nan, inf, 0.5}, color}}, fixed);
  check_inside({{"huge", {0, 1, 2}, {-1e308, 1e308, 0.0}, color}}, {});
  check_inside({{"tiny", {0, 1e-300, 2e-300}, {1e-310, 3e-310, 2e-310}, color}}, {});
  check_inside({{"flat", {5, 5, 5}, {1e300, 1e300, 1e300}, color}}, {});
  // A fifth of a denormal span is zero: such spans count as flat rather than giving a zero tick step.
  check_inside({{"denormal", {0, 5e-324}, {5e-324, 0.0}, color}}, {});
  PlotOptions log;
  log.log_y = true;
  check_inside({{"log", {0, 1, 2, 3}, {1e-300, 1e300, 0.0, 1.0}, color}}, log);
  check_inside({{"nothing drawable", {nan, 1}, {1, nan}, color}}, log);
  // A wide range of x values with a narrow fixed log range falls back to linear ticks.
  PlotOptions narrow;
  narrow.log_y = true;
  narrow.y_min = 2.0;
  narrow.y_max = 3.0;
  narrow.width = 160;
  narrow.height = 120;
  check_inside({{"narrow", {1e9, 2e9}, {2.5, 2.6}, color}}, narrow);
}

TEST_CASE("errors/line_plot: mismatched lengths name the series") {
  CHECK_THROWS_CONTAINING(line_plot({{"loss", {0, 1, 2}, {1.0, 2.0}, {}}}),
                          "line_plot: series 'loss' has 3 x values but 2 y values");
}

TEST_CASE("errors/line_plot: sizes and ranges out of bounds") {
  PlotOptions options;
  options.width = 100;
  CHECK_THROWS_CONTAINING(line_plot({}, options), "line_plot: width must be in [160, 8192] pixels, got 100");
  options = {};
  options.height = 119;
  CHECK_THROWS_CONTAINING(line_plot({}, options), "line_plot: height must be in [120, 8192] pixels, got 119");
  options = {};
  options.y_min = 1.0;
  options.y_max = 1.0;
  CHECK_THROWS_CONTAINING(line_plot({}, options), "line_plot: y_min must be below y_max");
  options = {};
  options.log_y = true;
  options.y_min = 0.0;
  CHECK_THROWS_CONTAINING(line_plot({}, options), "line_plot: a log y axis needs y_min > 0, got 0");
}
