// Image: 8-bit RGB pixels in row-major HWC order, the form every codec, dataset and drawing call uses.
//
// Pixel (x, y) channel c lives at pixels[(y * width + x) * 3 + c]. Images are always 3-channel: greyscale
// and palette files are expanded when read, alpha is dropped. Networks want float tensors instead, so
// image_to_tensor gives a (3, H, W) float32 tensor in [0, 1] (channel-first, like torchvision's ToTensor),
// and tensor_to_image goes back, clamping and rounding.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace minidet::data {

struct Color {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Color& other) const { return r == other.r && g == other.g && b == other.b; }
  bool operator!=(const Color& other) const { return !(*this == other); }
};

struct Image {
  static constexpr int64_t kChannels = 3;

  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3 bytes

  Image() = default;
  Image(int64_t width, int64_t height, Color fill = {});

  bool empty() const { return width == 0 || height == 0; }
  uint8_t* at(int64_t x, int64_t y) { return pixels.data() + (y * width + x) * kChannels; }
  const uint8_t* at(int64_t x, int64_t y) const { return pixels.data() + (y * width + x) * kChannels; }
  Color color_at(int64_t x, int64_t y) const;
  void set(int64_t x, int64_t y, Color color);
  bool contains(int64_t x, int64_t y) const { return x >= 0 && y >= 0 && x < width && y < height; }
  bool operator==(const Image& other) const;
  bool operator!=(const Image& other) const { return !(*this == other); }
};

// (3, H, W) float32 on the CPU, values in [0, 1].
Tensor image_to_tensor(const Image& image);
// Inverse of image_to_tensor: a (3, H, W) floating tensor in [0, 1] (any device); values are clamped.
Image tensor_to_image(const Tensor& tensor);

}  // namespace minidet::data
