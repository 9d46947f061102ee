#include "data/image/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "data/image/draw.h"
#include "data/image/font.h"

namespace minidet::data {

namespace {

// Data beyond this magnitude is clamped before any range arithmetic, so hi - lo never overflows to inf.
constexpr double kHuge = 1e300;
// A range thinner than this fraction of its magnitude is drawn as a constant: its ticks would print alike.
constexpr double kFlat = 1e-9;
// Spans and magnitudes below this count as zero: a fifth of a denormal span underflows to a zero step.
constexpr double kTiny = 1e-290;
constexpr int64_t kMaxSide = 8192;
constexpr int64_t kPad = 8;
constexpr int64_t kTickLength = 4;
constexpr int64_t kLineHeight = kGlyphHeight + 4;
constexpr int kLineThickness = 2;

const Color kWhite{255, 255, 255};
const Color kInk{0, 0, 0};
const Color kGrid{225, 225, 225};

struct Tick {
  double position;  // in axis space: the value, or its log10 on a log axis
  std::string label;
};

// One axis: the interval [low, high] of axis space that the plot area spans, and its labelled ticks.
struct Axis {
  double low = 0.0, high = 1.0;
  std::vector<Tick> ticks;
};

// The round step candidates 1, 2, 5 x 10^k around `span / 5`.
std::vector<double> round_steps(double span) {
  const double decade = std::floor(std::log10(span / 5.0));
  std::vector<double> steps;
  for (double exponent = decade - 1; exponent <= decade + 1; ++exponent)
    for (double mantissa : {1.0, 2.0, 5.0}) steps.push_back(mantissa * std::pow(10.0, exponent));
  return steps;
}

// Cleans printf's "%e" output for the 5x7 font, which has no '+': "2.50e-05" -> "2.5E-5".
std::string compact_exponent(std::string text) {
  const auto e = text.find('e');
  if (e == std::string::npos) return text;
  std::string mantissa = text.substr(0, e), exponent = text.substr(e + 1);
  if (mantissa.find('.') != std::string::npos) {
    while (mantissa.back() == '0') mantissa.pop_back();
    if (mantissa.back() == '.') mantissa.pop_back();
  }
  const bool negative = !exponent.empty() && exponent[0] == '-';
  if (!exponent.empty() && (exponent[0] == '-' || exponent[0] == '+')) exponent.erase(0, 1);
  exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
  return mantissa + "E" + (negative ? "-" : "") + exponent;
}

// A tick label with just the digits that tell neighbouring ticks (spaced `step` apart) apart.
std::string linear_label(double value, double step, bool scientific) {
  char text[64];
  if (value == 0.0) return "0";
  const int step_digit = static_cast<int>(std::floor(std::log10(step) + 1e-9));
  if (scientific) {
    const int value_digit = static_cast<int>(std::floor(std::log10(std::abs(value))));
    std::snprintf(text, sizeof(text), "%.*e", std::clamp(value_digit - step_digit, 0, 15), value);
    return compact_exponent(text);
  }
  std::snprintf(text, sizeof(text), "%.*f", std::clamp(-step_digit, 0, 15), value);
  return text;
}

// Ticks at multiples of a round step. A side that is not fixed grows to the next multiple, so the axis
// starts and ends on a tick; the step is the candidate giving the tick count closest to 5 (4 to 6 nearly
// always: the candidates are at most 2.5x apart).
Axis linear_axis(double low, double high, bool fixed_low, bool fixed_high) {
  Axis best;
  int64_t best_miss = std::numeric_limits<int64_t>::max();
  double best_step = 1.0;
  if (!(high - low > kTiny) || !std::isfinite(high - low)) return best;  // make_axis never asks this
  for (double step : round_steps(high - low)) {
    const double first = fixed_low ? std::ceil(low / step - 1e-9) : std::floor(low / step + 1e-9);
    const double last = fixed_high ? std::floor(high / step + 1e-9) : std::ceil(high / step - 1e-9);
    if (!(last - first < 1000.0)) continue;  // also keeps ++k below exact, far under 2^53
    const auto count = static_cast<int64_t>(last - first + 1);
    const int64_t miss = std::abs(count - 5);
    if (miss < best_miss || (miss == best_miss && step > best_step)) {
      best_miss = miss;
      best_step = step;
      best.low = fixed_low ? low : first * step;
      best.high = fixed_high ? high : last * step;
      best.ticks.clear();
      for (double k = first; k <= last; ++k) best.ticks.push_back({k * step, ""});
    }
  }
  const double magnitude = std::max(std::abs(best.low), std::abs(best.high));
  const bool scientific = magnitude >= 1e6 || magnitude < 1e-3;
  for (Tick& tick : best.ticks) {
    if (std::abs(tick.position) < best_step * 1e-9) tick.position = 0.0;  // k * step can miss zero by a hair
    tick.label = linear_label(tick.position, best_step, scientific);
  }
  return best;
}

std::string log_label(int mantissa, int64_t exponent) {
  if (exponent >= -3 && exponent <= 5) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.*f", static_cast<int>(std::max<int64_t>(0, -exponent)),
                  mantissa * std::pow(10.0, static_cast<double>(exponent)));
    return text;
  }
  return std::to_string(mantissa) + "E" + std::to_string(exponent);
}

// A log axis in log10 space. Free sides grow to whole decades. Ticks are 1, 2, 5 x 10^k over about one
// decade, 1 and 5 x 10^k over two, whole decades (every 1st, 2nd, 5th, 10th...) beyond.
Axis log_axis(double low, double high, bool fixed_low, bool fixed_high) {
  Axis axis;
  axis.low = fixed_low ? low : std::floor(low + 1e-9);
  axis.high = fixed_high ? high : std::ceil(high - 1e-9);
  const auto first_decade = static_cast<int64_t>(std::floor(axis.low)) - 1;
  const auto last_decade = static_cast<int64_t>(std::ceil(axis.high));
  struct Candidate {
    std::vector<int> mantissas;
    int64_t stride;
  };
  std::vector<Candidate> candidates = {{{1, 2, 5}, 1}, {{1, 5}, 1}};
  for (int64_t stride = 1; stride <= 1000; stride *= 10)
    for (int64_t factor : {1, 2, 5}) candidates.push_back({{1}, stride * factor});
  int64_t best_miss = std::numeric_limits<int64_t>::max();
  for (const Candidate& candidate : candidates) {
    std::vector<Tick> ticks;
    for (int64_t decade = first_decade; decade <= last_decade; ++decade) {
      if (decade % candidate.stride != 0) continue;
      for (int mantissa : candidate.mantissas) {
        const double position = static_cast<double>(decade) + std::log10(static_cast<double>(mantissa));
        if (position >= axis.low - 1e-9 && position <= axis.high + 1e-9)
          ticks.push_back({position, log_label(mantissa, decade)});
      }
    }
    const int64_t miss = std::abs(static_cast<int64_t>(ticks.size()) - 5);
    if (miss < best_miss) {  // on a tie keep the denser set, listed first
      best_miss = miss;
      axis.ticks = std::move(ticks);
    }
  }
  if (axis.ticks.size() >= 2) return axis;
  // A fixed range narrower than a factor of 2 holds no useful 1-2-5 tick: place linear ones instead.
  const Axis linear = linear_axis(std::pow(10.0, axis.low), std::pow(10.0, axis.high), true, true);
  axis.ticks.clear();
  for (const Tick& tick : linear.ticks)
    if (tick.position > 0.0) axis.ticks.push_back({std::log10(tick.position), tick.label});
  return axis;
}

// The axis for `values` (already in axis space, finite), with the fixed bounds that are finite.
Axis make_axis(const std::vector<double>& values, double fixed_low, double fixed_high, bool log) {
  const bool has_low = std::isfinite(fixed_low), has_high = std::isfinite(fixed_high);
  double low = 0.0, high = 1.0;
  if (!values.empty()) {
    const auto [min_it, max_it] = std::minmax_element(values.begin(), values.end());
    low = std::clamp(*min_it, -kHuge, kHuge);
    high = std::clamp(*max_it, -kHuge, kHuge);
  }
  if (has_low) low = std::clamp(fixed_low, -kHuge, kHuge);
  if (has_high) high = std::clamp(fixed_high, -kHuge, kHuge);
  // A constant (or a range squeezed by one fixed bound) opens up around its value: half a decade each way
  // on a log axis, 10% of the value (or 1 around zero) on a linear one.
  const double magnitude = std::max(std::abs(low), std::abs(high));
  if (high - low <= std::max(kFlat * magnitude, kTiny)) {
    const double spread = log ? 0.5 : (magnitude > kTiny ? 0.1 * magnitude : 1.0);
    if (has_low) {
      high = low + 2 * spread;
    } else if (has_high) {
      low = high - 2 * spread;
    } else {
      const double middle = 0.5 * (low + high);
      low = middle - spread;
      high = middle + spread;
    }
  }
  return log ? log_axis(low, high, has_low, has_high) : linear_axis(low, high, has_low, has_high);
}

// The plot area: pixels [left, right) x [top, bottom). Axis low maps to its first pixel, high to its last.
struct Frame {
  int64_t left, top, right, bottom;
};

// Where `value` lands between `first` and `last` pixel; far outside values stop at a million pixels away,
// which keeps the arithmetic finite and the clipped line's direction exact to a fraction of a pixel.
double to_pixel(double value, const Axis& axis, double first, double last) {
  const double t = std::clamp((value - axis.low) / (axis.high - axis.low), -1e6, 1e6);
  return first + t * (last - first);
}

// Draws the labels left to right, skipping one that would touch the previous one.
void draw_x_labels(Image& image, const std::vector<std::pair<int64_t, std::string>>& labels, int64_t y) {
  int64_t free_from = std::numeric_limits<int64_t>::min();
  for (const auto& [center, text] : labels) {
    const int64_t x = center - text_width(text) / 2;
    if (x < free_from) continue;
    draw_text(image, x, y, text, kInk);
    free_from = x + text_width(text) + kGlyphAdvance;
  }
}

}  // namespace

Image line_plot(const std::vector<PlotSeries>& series, const PlotOptions& options) {
  MINIDET_CHECK(options.width >= 160 && options.width <= kMaxSide, "line_plot: width must be in [160, ",
                kMaxSide, "] pixels, got ", options.width);
  MINIDET_CHECK(options.height >= 120 && options.height <= kMaxSide, "line_plot: height must be in [120, ",
                kMaxSide, "] pixels, got ", options.height);
  for (const PlotSeries& one : series)
    MINIDET_CHECK(one.x.size() == one.y.size(), "line_plot: series '", one.name, "' has ", one.x.size(),
                  " x values but ", one.y.size(), " y values");
  const bool fixed_low = std::isfinite(options.y_min), fixed_high = std::isfinite(options.y_max);
  MINIDET_CHECK(!(fixed_low && fixed_high) || options.y_min < options.y_max,
                "line_plot: y_min must be below y_max, got ", options.y_min, " and ", options.y_max);
  if (options.log_y) {
    MINIDET_CHECK(!fixed_low || options.y_min > 0.0, "line_plot: a log y axis needs y_min > 0, got ",
                  options.y_min);
    MINIDET_CHECK(!fixed_high || options.y_max > 0.0, "line_plot: a log y axis needs y_max > 0, got ",
                  options.y_max);
  }

  // Points in axis space; a point that cannot be drawn is NaN, which breaks the line there.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<std::pair<double, double>>> points(series.size());
  std::vector<double> all_x, all_y;
  for (size_t s = 0; s < series.size(); ++s) {
    for (size_t i = 0; i < series[s].x.size(); ++i) {
      const double x = series[s].x[i];
      double y = series[s].y[i];
      if (options.log_y) y = y > 0.0 ? std::log10(y) : nan;
      const bool usable = std::isfinite(x) && std::isfinite(y);
      points[s].push_back(usable ? std::make_pair(x, y) : std::make_pair(nan, nan));
      if (usable) all_x.push_back(x), all_y.push_back(y);
    }
  }
  const Axis x_axis = make_axis(all_x, nan, nan, false);
  const Axis y_axis = make_axis(all_y, options.log_y && fixed_low ? std::log10(options.y_min) : options.y_min,
                                options.log_y && fixed_high ? std::log10(options.y_max) : options.y_max,
                                options.log_y);

  // Layout, top to bottom: title, legend rows, y label, the frame, x tick labels, x label.
  const int title_scale = options.width >= 360 ? 2 : 1;
  int64_t y_cursor = kPad;
  const int64_t title_y = y_cursor;
  if (!options.title.empty()) y_cursor += kGlyphHeight * title_scale + 6;
  int64_t y_label_width = 0;
  for (const Tick& tick : y_axis.ticks) y_label_width = std::max(y_label_width, text_width(tick.label));
  const int64_t left = std::min(kPad + y_label_width + 3 + kTickLength + 1, options.width / 2);
  const int64_t last_x_label = x_axis.ticks.empty() ? 0 : text_width(x_axis.ticks.back().label);
  const int64_t right = std::max(left + 16, options.width - kPad - std::max<int64_t>(1, last_x_label / 2));
  const int64_t bottom_margin =
      1 + kTickLength + 2 + kGlyphHeight + (options.x_label.empty() ? 0 : 5 + kGlyphHeight) + kPad;
  const int64_t bottom = options.height - bottom_margin;
  const int64_t y_label_rows = options.y_label.empty() ? 0 : 1;
  // Legend entries flow into rows as wide as the plot; rows that would squeeze the plot below 24 pixels
  // are left out.
  struct Entry {
    size_t series;
    int64_t x, y;
  };
  constexpr int64_t kSwatch = 16;
  std::vector<Entry> legend;
  {
    int64_t x = left, row = 0;
    const int64_t max_rows = std::max<int64_t>(0, (bottom - y_cursor - (y_label_rows + 1) * kLineHeight - 28) /
                                                      kLineHeight);
    for (size_t s = 0; s < series.size(); ++s) {
      if (series[s].name.empty()) continue;
      const int64_t entry_width = kSwatch + 4 + text_width(series[s].name);
      if (x > left && x + entry_width > right) x = left, ++row;
      if (row >= max_rows) break;
      legend.push_back({s, x, y_cursor + row * kLineHeight});
      x += entry_width + 12;
    }
    if (!legend.empty()) y_cursor += (legend.back().y - y_cursor) + kLineHeight;
  }
  const int64_t y_label_y = y_cursor;
  // The top tick label is centred on the frame's top line and pokes half a glyph above it: leave it room.
  y_cursor += y_label_rows * kLineHeight + kGlyphHeight / 2;
  const Frame frame{left, y_cursor + 1, right, std::max(bottom, y_cursor + 3)};

  Image image(options.width, options.height, kWhite);
  const double first_x = frame.left, last_x = frame.right - 1;
  const double first_y = frame.bottom - 1, last_y = frame.top;  // y grows downwards, values upwards
  const auto x_pixel = [&](double v) { return std::llround(to_pixel(v, x_axis, first_x, last_x)); };
  const auto y_pixel = [&](double v) { return std::llround(to_pixel(v, y_axis, first_y, last_y)); };

  for (const Tick& tick : x_axis.ticks)
    fill_rect(image, x_pixel(tick.position), frame.top, x_pixel(tick.position) + 1, frame.bottom, kGrid);
  for (const Tick& tick : y_axis.ticks)
    fill_rect(image, frame.left, y_pixel(tick.position), frame.right, y_pixel(tick.position) + 1, kGrid);

  // Series: each segment between two drawable neighbours is cut to the plot area in double precision first,
  // so values far outside a fixed range still draw the visible part of their line.
  for (size_t s = 0; s < series.size(); ++s) {
    const auto& line = points[s];
    for (size_t i = 0; i < line.size(); ++i) {
      if (std::isnan(line[i].first)) continue;
      const double ax = to_pixel(line[i].first, x_axis, first_x, last_x);
      const double ay = to_pixel(line[i].second, y_axis, first_y, last_y);
      const bool joined_before = i > 0 && !std::isnan(line[i - 1].first);
      const bool joined_after = i + 1 < line.size() && !std::isnan(line[i + 1].first);
      if (!joined_before && !joined_after) {
        // A lone point has no segment to show it: a 3x3 dot, when it is inside the plot.
        if (ax >= first_x && ax <= last_x && ay >= last_y && ay <= first_y)
          fill_rect(image, std::llround(ax) - 1, std::llround(ay) - 1, std::llround(ax) + 2,
                    std::llround(ay) + 2, series[s].color);
        continue;
      }
      if (!joined_after) continue;
      double bx = to_pixel(line[i + 1].first, x_axis, first_x, last_x);
      double by = to_pixel(line[i + 1].second, y_axis, first_y, last_y);
      double cx = ax, cy = ay;
      if (!clip_segment(cx, cy, bx, by, first_x, last_y, last_x, first_y)) continue;
      draw_line(image, std::llround(cx), std::llround(cy), std::llround(bx), std::llround(by), series[s].color,
                kLineThickness);
    }
  }

  // The frame goes on last: a thick line's overhang of one pixel lands on it and is painted over.
  fill_rect(image, frame.left - 1, frame.top - 1, frame.right + 1, frame.top, kInk);
  fill_rect(image, frame.left - 1, frame.bottom, frame.right + 1, frame.bottom + 1, kInk);
  fill_rect(image, frame.left - 1, frame.top - 1, frame.left, frame.bottom + 1, kInk);
  fill_rect(image, frame.right, frame.top - 1, frame.right + 1, frame.bottom + 1, kInk);

  std::vector<std::pair<int64_t, std::string>> x_labels;
  for (const Tick& tick : x_axis.ticks) {
    const int64_t x = x_pixel(tick.position);
    fill_rect(image, x, frame.bottom + 1, x + 1, frame.bottom + 1 + kTickLength, kInk);
    x_labels.emplace_back(x, tick.label);
  }
  const int64_t x_labels_y = frame.bottom + 1 + kTickLength + 2;
  draw_x_labels(image, x_labels, x_labels_y);
  int64_t free_above = std::numeric_limits<int64_t>::max();  // y labels run bottom to top, never touching
  for (const Tick& tick : y_axis.ticks) {
    const int64_t y = y_pixel(tick.position);
    fill_rect(image, frame.left - 1 - kTickLength, y, frame.left - 1, y + 1, kInk);
    const int64_t label_top = y - kGlyphHeight / 2;
    if (label_top + kGlyphHeight + 1 > free_above) continue;
    draw_text(image, frame.left - 1 - kTickLength - 3 - text_width(tick.label), label_top, tick.label, kInk);
    free_above = label_top;
  }
  if (!options.x_label.empty())
    draw_text(image, (frame.left + frame.right - text_width(options.x_label)) / 2,
              x_labels_y + kGlyphHeight + 5, options.x_label, kInk);
  if (!options.y_label.empty()) draw_text(image, kPad, y_label_y, options.y_label, kInk);
  if (!options.title.empty())
    draw_text(image, (options.width - text_width(options.title, title_scale)) / 2, title_y, options.title,
              kInk, title_scale);
  for (const Entry& entry : legend) {
    const int64_t middle = entry.y + kGlyphHeight / 2;
    fill_rect(image, entry.x, middle - 1, entry.x + kSwatch, middle + 1, series[entry.series].color);
    draw_text(image, entry.x + kSwatch + 4, entry.y, series[entry.series].name, kInk);
  }
  return image;
}

}  // namespace minidet::data
