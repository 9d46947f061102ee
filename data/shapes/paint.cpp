#include "data/shapes/paint.h"

#include <algorithm>
#include <cstdlib>

#include "core/generator.h"

namespace minidet::data {

namespace {

int color_distance(Color a, Color b) { return std::abs(a.r - b.r) + std::abs(a.g - b.g) + std::abs(a.b - b.b); }

constexpr int kMinContrast = 160;
constexpr int kColorAttempts = 20;

}  // namespace

Color random_color(Generator& generator) {
  return {static_cast<uint8_t>(generator.next_int(0, 256)), static_cast<uint8_t>(generator.next_int(0, 256)),
          static_cast<uint8_t>(generator.next_int(0, 256))};
}

Color contrasting_color(Generator& generator, Color background) {
  Color color = random_color(generator);
  for (int tries = 1; tries < kColorAttempts && color_distance(color, background) < kMinContrast; ++tries)
    color = random_color(generator);
  return color;
}

void paint_mask(Image& image, const Mask& mask, Color color) {
  for (int64_t y = mask.y0; y < mask.y0 + mask.height; ++y)
    for (int64_t x = mask.x0; x < mask.x0 + mask.width; ++x)
      if (mask.contains(x, y)) image.set(x, y, color);
}

void add_uniform_noise(Image& image, int amplitude, uint64_t image_seed) {
  if (amplitude <= 0) return;
  Generator noise(mix_seed(image_seed ^ 0x6e6f697365ull /* "noise" */));
  const uint64_t levels = 2 * static_cast<uint64_t>(amplitude) + 1;
  for (int64_t pixel = 0; pixel < image.width * image.height; ++pixel) {
    const uint64_t bits = noise.next_u64();  // 16 bits per channel
    for (int channel = 0; channel < 3; ++channel) {
      const uint64_t chunk = (bits >> (16 * channel)) & 0xffff;
      const int offset = static_cast<int>((chunk * levels) >> 16) - amplitude;
      uint8_t& value = image.pixels[pixel * 3 + channel];
      value = static_cast<uint8_t>(std::clamp(static_cast<int>(value) + offset, 0, 255));
    }
  }
}

}  // namespace minidet::data
