// line_plot: a small line chart rendered into an Image with minidet's own drawing (data/image/draw.h), for
// the training program's loss and mAP curves. No plotting library: axes, ticks with round numbers, a
// legend and polylines drawn with integer pixels.
//
// Layout, top to bottom: the title, the legend (each named series' colour and name, in rows), the y label,
// the plot area inside a 1-pixel black frame with light grey grid lines at the ticks, then the x tick labels
// and the x label. A free end of an axis grows to the next round tick (1, 2, 5 x 10^k; whole decades on a
// log axis), so the axis starts and ends on a labelled value; a fixed end is kept exactly. The first pixel
// row inside the frame is the axis' top value and the last row its bottom value. Series are 2-pixel lines
// cut to the plot area; a point with no drawable neighbour is a 3x3 dot.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "data/image/image.h"

namespace minidet::data {

struct PlotSeries {
  std::string name;       // shown in the legend
  std::vector<double> x;  // same length as y; non-finite points are skipped (the line breaks there)
  std::vector<double> y;
  Color color{0, 0, 0};   // class_color(i + 1) is a good default for series i
};

struct PlotOptions {
  std::string title;
  std::string x_label = "step";
  std::string y_label;
  int64_t width = 640;   // pixels, 160 to 8192
  int64_t height = 400;  // pixels, 120 to 8192
  bool log_y = false;    // logarithmic y axis (non-positive values skipped)
  double y_min = NAN, y_max = NAN;  // fixed y range when finite (e.g. 0..1 for mAP); else from the data
};

// Throws on mismatched x/y lengths, sizes outside the limits, y_min >= y_max, or a non-positive fixed bound
// on a log axis. Series may be empty, or hold no drawable point (then only axes).
Image line_plot(const std::vector<PlotSeries>& series, const PlotOptions& options = {});

}  // namespace minidet::data
