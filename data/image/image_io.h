// Reading and writing image files through libpng and libjpeg (the system libraries; minidet has no codec
// of its own).
//
// read_image looks at the file's first bytes, not its extension, and accepts PNG and JPEG. Whatever the
// file holds (grey, palette, 16-bit, alpha) comes back as 8-bit RGB; alpha is composited over black.
// Every failure (missing file, truncated or corrupt data, unsupported colour space) throws minidet::Error
// with the path and the codec's own message.
#pragma once

#include <string>

#include "data/image/image.h"

namespace minidet::data {

Image read_image(const std::string& path);
Image read_png(const std::string& path);
Image read_jpeg(const std::string& path);

void write_png(const Image& image, const std::string& path);
void write_jpeg(const Image& image, const std::string& path, int quality = 95);

}  // namespace minidet::data
