// PNG through libpng's "simplified" API (png_image_*), which reports errors in png_image::message instead
// of longjmp, so no setjmp dance is needed here (compare jpeg_io.cpp).
#include <png.h>

#include <cstring>

#include "core/error.h"
#include "data/image/image_io.h"

namespace minidet::data {

Image read_png(const std::string& path) {
  png_image info;
  std::memset(&info, 0, sizeof(info));
  info.version = PNG_IMAGE_VERSION;
  MINIDET_CHECK(png_image_begin_read_from_file(&info, path.c_str()) != 0, "read_png: cannot read ", path,
                ": ", info.message);
  info.format = PNG_FORMAT_RGB;
  Image image(static_cast<int64_t>(info.width), static_cast<int64_t>(info.height));  // zeros: black
  // A NULL background composites any alpha over the buffer's current contents, i.e. over black.
  const bool ok = png_image_finish_read(&info, nullptr, image.pixels.data(), 0, nullptr) != 0;
  MINIDET_CHECK(ok, "read_png: cannot decode ", path, ": ", info.message);
  return image;
}

void write_png(const Image& image, const std::string& path) {
  MINIDET_CHECK(!image.empty(), "write_png: cannot write an empty image to ", path);
  MINIDET_CHECK(static_cast<int64_t>(image.pixels.size()) == image.width * image.height * 3,
                "write_png: pixel buffer does not match ", image.width, "x", image.height, " for ", path);
  png_image info;
  std::memset(&info, 0, sizeof(info));
  info.version = PNG_IMAGE_VERSION;
  info.width = static_cast<png_uint_32>(image.width);
  info.height = static_cast<png_uint_32>(image.height);
  info.format = PNG_FORMAT_RGB;
  const bool ok = png_image_write_to_file(&info, path.c_str(), 0, image.pixels.data(), 0, nullptr) != 0;
  MINIDET_CHECK(ok, "write_png: cannot write ", path, ": ", info.message);
}

}  // namespace minidet::data
