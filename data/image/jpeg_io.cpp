// JPEG through libjpeg(-turbo).
//
// libjpeg reports a fatal error by calling error_exit, which must not return. The classic answer is
// setjmp/longjmp: the functions that call setjmp below keep only plain C state and objects created before
// setjmp, so jumping back skips no C++ destructor. The codec's message is copied into the error manager and
// turned into a minidet::Error after the jump.
#include <csetjmp>
#include <cstdio>
#include <memory>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "core/error.h"
#include "data/image/image_io.h"

namespace minidet::data {
namespace {

struct JpegErrorManager {
  jpeg_error_mgr base;  // first member, so libjpeg's pointer to it is also a pointer to this struct
  std::jmp_buf jump_back;
  char message[JMSG_LENGTH_MAX];
};

void on_jpeg_error(j_common_ptr codec) {
  auto* manager = reinterpret_cast<JpegErrorManager*>(codec->err);
  codec->err->format_message(codec, manager->message);
  std::longjmp(manager->jump_back, 1);
}

void silence_jpeg_warning(j_common_ptr, int) {}  // corrupt-but-decodable data still decodes

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using FileHandle = std::unique_ptr<std::FILE, FileCloser>;

FileHandle open_file(const std::string& path, const char* mode, const char* caller) {
  FileHandle file(std::fopen(path.c_str(), mode));
  MINIDET_CHECK(file != nullptr, caller, ": cannot open ", path);
  return file;
}

// Returns false (with manager.message set) when libjpeg failed.
bool decode(std::FILE* file, Image& image, JpegErrorManager& manager) {
  jpeg_decompress_struct codec;
  codec.err = jpeg_std_error(&manager.base);
  manager.base.error_exit = on_jpeg_error;
  manager.base.emit_message = silence_jpeg_warning;
  if (setjmp(manager.jump_back)) {
    jpeg_destroy_decompress(&codec);
    return false;
  }
  jpeg_create_decompress(&codec);
  jpeg_stdio_src(&codec, file);
  jpeg_read_header(&codec, TRUE);
  codec.out_color_space = JCS_RGB;  // greyscale and YCbCr convert; CMYK makes libjpeg fail cleanly
  jpeg_start_decompress(&codec);
  image.width = codec.output_width;
  image.height = codec.output_height;
  image.pixels.resize(static_cast<size_t>(image.width * image.height * 3));  // no new object: a resize
  while (codec.output_scanline < codec.output_height) {
    JSAMPROW row = image.pixels.data() + static_cast<size_t>(codec.output_scanline) * image.width * 3;
    jpeg_read_scanlines(&codec, &row, 1);
  }
  jpeg_finish_decompress(&codec);
  jpeg_destroy_decompress(&codec);
  return true;
}

bool encode(const Image& image, std::FILE* file, int quality, JpegErrorManager& manager) {
  jpeg_compress_struct codec;
  codec.err = jpeg_std_error(&manager.base);
  manager.base.error_exit = on_jpeg_error;
  if (setjmp(manager.jump_back)) {
    jpeg_destroy_compress(&codec);
    return false;
  }
  jpeg_create_compress(&codec);
  jpeg_stdio_dest(&codec, file);
  codec.image_width = static_cast<JDIMENSION>(image.width);
  codec.image_height = static_cast<JDIMENSION>(image.height);
  codec.input_components = 3;
  codec.in_color_space = JCS_RGB;
  jpeg_set_defaults(&codec);
  jpeg_set_quality(&codec, quality, TRUE);
  jpeg_start_compress(&codec, TRUE);
  while (codec.next_scanline < codec.image_height) {
    // libjpeg's API takes non-const rows even though compression only reads them.
    JSAMPROW row = const_cast<uint8_t*>(image.pixels.data()) + static_cast<size_t>(codec.next_scanline) *
                                                                   image.width * 3;
    jpeg_write_scanlines(&codec, &row, 1);
  }
  jpeg_finish_compress(&codec);
  jpeg_destroy_compress(&codec);
  return true;
}

}  // namespace

Image read_jpeg(const std::string& path) {
  FileHandle file = open_file(path, "rb", "read_jpeg");
  JpegErrorManager manager;
  Image image;
  MINIDET_CHECK(decode(file.get(), image, manager), "read_jpeg: cannot decode ", path, ": ", manager.message);
  return image;
}

void write_jpeg(const Image& image, const std::string& path, int quality) {
  MINIDET_CHECK(!image.empty(), "write_jpeg: cannot write an empty image to ", path);
  MINIDET_CHECK(quality >= 1 && quality <= 100, "write_jpeg: quality must be in [1, 100], got ", quality);
  FileHandle file = open_file(path, "wb", "write_jpeg");
  JpegErrorManager manager;
  MINIDET_CHECK(encode(image, file.get(), quality, manager), "write_jpeg: cannot encode ", path, ": ",
                manager.message);
  MINIDET_CHECK(std::fflush(file.get()) == 0, "write_jpeg: cannot write ", path);
}

}  // namespace minidet::data
