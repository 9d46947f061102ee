#include "data/transforms/transforms.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace minidet::data {

Sample horizontal_flip(Sample sample) {
  Image& image = sample.image;
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width / 2; ++x) {
      uint8_t* left = image.at(x, y);
      uint8_t* right = image.at(image.width - 1 - x, y);
      for (int c = 0; c < Image::kChannels; ++c) std::swap(left[c], right[c]);
    }
  const double width = static_cast<double>(image.width);
  for (Box& box : sample.boxes) box = {width - box.x2, box.y1, width - box.x1, box.y2};
  // A mirror turns the other way: the x axis (cos a, -sin a) becomes (-cos a, -sin a), the same line as
  // (cos(-a), -sin(-a)) reversed, so the angle flips sign (normalised back into the range: -(-pi/2) = pi/2
  // wraps to -pi/2).
  for (RotatedBox& box : sample.rotated_boxes)
    box = RotatedBox{width - box.cx, box.cy, box.w, box.h, -box.angle}.normalized();
  sample.flipped = !sample.flipped;  // a second flip restores the dataset's image
  return sample;
}

namespace {

// Where output index `out` samples the source axis of `source_size` pixels: the lower neighbour and the
// weight of the upper one.
struct Tap {
  int64_t low, high;
  double weight_high;
};

std::vector<Tap> bilinear_taps(int64_t source_size, int64_t output_size) {
  std::vector<Tap> taps(output_size);
  const double scale = static_cast<double>(source_size) / static_cast<double>(output_size);
  for (int64_t out = 0; out < output_size; ++out) {
    const double position = std::clamp((out + 0.5) * scale - 0.5, 0.0, static_cast<double>(source_size - 1));
    const auto low = static_cast<int64_t>(std::floor(position));
    taps[out] = {low, std::min(low + 1, source_size - 1), position - static_cast<double>(low)};
  }
  return taps;
}

}  // namespace

Sample resize(Sample sample, int64_t width, int64_t height) {
  MINIDET_CHECK(width > 0 && height > 0, "resize: target size must be positive, got ", width, "x", height);
  const Image& source = sample.image;
  MINIDET_CHECK(!source.empty(), "resize: cannot resize an empty image");
  const double scale_x = static_cast<double>(width) / static_cast<double>(source.width);
  const double scale_y = static_cast<double>(height) / static_cast<double>(source.height);
  // A rotated rectangle stays one only under a uniform scale (a stretch along x skews a turned box into a
  // parallelogram), so rotated boxes need the aspect kept.
  MINIDET_CHECK(sample.rotated_boxes.empty() || std::abs(scale_x - scale_y) <= 1e-12 * std::max(scale_x, scale_y),
                "resize: a sample with rotated boxes must keep its aspect ratio (", source.width, "x", source.height,
                " to ", width, "x", height, " scales x by ", scale_x, " and y by ", scale_y,
                "); a rotated box under a non-uniform scale is no longer a rectangle");
  const std::vector<Tap> column_taps = bilinear_taps(source.width, width);
  const std::vector<Tap> row_taps = bilinear_taps(source.height, height);
  Image resized(width, height);
  for (int64_t y = 0; y < height; ++y) {
    const Tap& row = row_taps[y];
    for (int64_t x = 0; x < width; ++x) {
      const Tap& column = column_taps[x];
      for (int c = 0; c < Image::kChannels; ++c) {
        const double top = source.at(column.low, row.low)[c] * (1 - column.weight_high) +
                           source.at(column.high, row.low)[c] * column.weight_high;
        const double bottom = source.at(column.low, row.high)[c] * (1 - column.weight_high) +
                              source.at(column.high, row.high)[c] * column.weight_high;
        const double value = top * (1 - row.weight_high) + bottom * row.weight_high;
        resized.at(x, y)[c] = static_cast<uint8_t>(std::clamp(std::lround(value), 0l, 255l));
      }
    }
  }
  for (Box& box : sample.boxes) box = {box.x1 * scale_x, box.y1 * scale_y, box.x2 * scale_x, box.y2 * scale_y};
  for (RotatedBox& box : sample.rotated_boxes)
    box = {box.cx * scale_x, box.cy * scale_x, box.w * scale_x, box.h * scale_x, box.angle};
  sample.image = std::move(resized);
  return sample;
}

Tensor normalize(const Tensor& images, const std::array<float, 3>& mean, const std::array<float, 3>& stddev) {
  MINIDET_CHECK((images.dim() == 3 && images.size(0) == 3) || (images.dim() == 4 && images.size(1) == 3),
                "normalize: expected a (3, H, W) or (N, 3, H, W) tensor, got shape ", images.sizes());
  for (int c = 0; c < 3; ++c)
    MINIDET_CHECK(stddev[c] > 0, "normalize: stddev[", c, "] must be positive, got ", stddev[c]);
  NoGradGuard no_recording;  // an input transform: nothing upstream to differentiate
  Tensor result = images.to(TensorOptions(kFloat32, Device::cpu())).contiguous().clone();
  float* values = result.data<float>();
  const int64_t plane = result.size(-1) * result.size(-2);
  const int64_t planes = result.numel() / plane;
  for (int64_t p = 0; p < planes; ++p) {
    const int c = static_cast<int>(p % 3);
    for (int64_t i = 0; i < plane; ++i) values[p * plane + i] = (values[p * plane + i] - mean[c]) / stddev[c];
  }
  return result.to(images.device());
}

Transform random_horizontal_flip(double probability) {
  MINIDET_CHECK(probability >= 0 && probability <= 1, "random_horizontal_flip: probability must be in [0, 1], got ",
                probability);
  return [probability](Sample sample, Generator& generator) {
    return generator.next_uniform() < probability ? horizontal_flip(std::move(sample)) : sample;
  };
}

Transform resize_to(int64_t width, int64_t height) {
  MINIDET_CHECK(width > 0 && height > 0, "resize_to: target size must be positive, got ", width, "x", height);
  return [width, height](Sample sample, Generator&) { return resize(std::move(sample), width, height); };
}

Transform compose(std::vector<Transform> transforms) {
  return [transforms = std::move(transforms)](Sample sample, Generator& generator) {
    for (const Transform& transform : transforms) sample = transform(std::move(sample), generator);
    return sample;
  };
}

}  // namespace minidet::data
