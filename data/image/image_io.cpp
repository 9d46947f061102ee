#include "data/image/image_io.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace minidet::data {

Image read_image(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  MINIDET_CHECK(file != nullptr, "read_image: cannot open ", path);
  unsigned char magic[8] = {0};
  const size_t got = std::fread(magic, 1, sizeof(magic), file);
  std::fclose(file);
  static const unsigned char kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (got == 8 && std::memcmp(magic, kPngSignature, 8) == 0) return read_png(path);
  if (got >= 3 && magic[0] == 0xff && magic[1] == 0xd8 && magic[2] == 0xff) return read_jpeg(path);
  MINIDET_FAIL("read_image: ", path, " is neither a PNG nor a JPEG file (by its first bytes)");
}

}  // namespace minidet::data
