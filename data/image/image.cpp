#include "data/image/image.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/factories.h"

namespace minidet::data {

Image::Image(int64_t width_, int64_t height_, Color fill) : width(width_), height(height_) {
  MINIDET_CHECK(width_ >= 0 && height_ >= 0, "Image: negative size ", width_, "x", height_);
  pixels.resize(static_cast<size_t>(width_ * height_ * kChannels));
  for (int64_t i = 0; i < width_ * height_; ++i) {
    pixels[i * 3] = fill.r;
    pixels[i * 3 + 1] = fill.g;
    pixels[i * 3 + 2] = fill.b;
  }
}

Color Image::color_at(int64_t x, int64_t y) const {
  const uint8_t* p = at(x, y);
  return {p[0], p[1], p[2]};
}

void Image::set(int64_t x, int64_t y, Color color) {
  uint8_t* p = at(x, y);
  p[0] = color.r;
  p[1] = color.g;
  p[2] = color.b;
}

bool Image::operator==(const Image& other) const {
  return width == other.width && height == other.height && pixels == other.pixels;
}

Tensor image_to_tensor(const Image& image) {
  Tensor tensor = empty({Image::kChannels, image.height, image.width});
  float* out = tensor.data<float>();
  const int64_t plane = image.height * image.width;
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < Image::kChannels; ++c)
      out[c * plane + i] = static_cast<float>(image.pixels[i * 3 + c]) / 255.0f;
  return tensor;
}

Image tensor_to_image(const Tensor& tensor) {
  MINIDET_CHECK(tensor.dim() == 3 && tensor.size(0) == Image::kChannels,
                "tensor_to_image: expected a (3, H, W) tensor, got shape ", tensor.sizes());
  const std::vector<float> values = tensor.to_vector<float>();
  Image image(tensor.size(2), tensor.size(1));
  const int64_t plane = image.height * image.width;
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < Image::kChannels; ++c) {
      const float value = std::clamp(values[c * plane + i], 0.0f, 1.0f);  // NaN stays NaN: map it to 0
      image.pixels[i * 3 + c] = std::isnan(value) ? 0 : static_cast<uint8_t>(std::lround(value * 255.0f));
    }
  return image;
}

}  // namespace minidet::data
