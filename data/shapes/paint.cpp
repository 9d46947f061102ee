#include "data/shapes/paint.h"

#include <algorithm>

#include "core/generator.h"

namespace minidet::data {

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
