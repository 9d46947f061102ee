// Images: codecs through libpng and libjpeg, tensor conversion, drawing.
#include "core/factories.h"
#include "data/image/draw.h"
#include "data/image/image_io.h"
#include "tests/data/temp_dir.h"
#include "tests/support.h"

using namespace minidet::data;
using minidet::test::TempDir;

namespace {

Image gradient(int64_t width, int64_t height) {
  Image image(width, height);
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) image.set(x, y, {uint8_t(x * 7), uint8_t(y * 5), uint8_t(x + y)});
  return image;
}

}  // namespace

TEST_CASE("values/image: png round trip is exact and jpeg is close") {
  TempDir dir;
  const Image image = gradient(23, 17);
  write_png(image, dir.file("g.png"));
  CHECK(read_image(dir.file("g.png")) == image);
  write_jpeg(image, dir.file("g.jpg"), 100);
  const Image decoded = read_image(dir.file("g.jpg"));
  REQUIRE(decoded.width == 23);
  REQUIRE(decoded.height == 17);
  int worst = 0;
  for (size_t i = 0; i < image.pixels.size(); ++i) worst = std::max(worst, std::abs(image.pixels[i] - decoded.pixels[i]));
  CHECK(worst < 24);  // chroma subsampling blurs colour edges a little
}

TEST_CASE("values/image: tensor conversion is channel first in 0..1") {
  const Image image = gradient(4, 3);
  const minidet::Tensor tensor = image_to_tensor(image);
  CHECK(tensor.sizes() == minidet::Shape{3, 3, 4});
  const std::vector<float> values = tensor.to_vector<float>();
  CHECK(values[1 * 12 + 2 * 4 + 3] == doctest::Approx(image.color_at(3, 2).g / 255.0));
  CHECK(tensor_to_image(tensor) == image);
}

TEST_CASE("values/image: drawing stays inside the image") {
  Image image(20, 10);
  draw_box(image, {2, 2, 8, 6}, {255, 0, 0});
  CHECK(image.color_at(2, 2) == Color{255, 0, 0});
  CHECK(image.color_at(7, 5) == Color{255, 0, 0});
  CHECK(image.color_at(4, 4) == Color{0, 0, 0});  // outline only
  CHECK(image.color_at(8, 6) == Color{0, 0, 0});  // x2, y2 are exclusive
  draw_box(image, {-50, -50, 500, 500}, {0, 255, 0});  // clipped, no crash
  draw_text(image, 15, 5, "CROSS 0.97", {255, 255, 255});
  CHECK(text_width("AB") == 11);
  LabelledBoxes truth{{{2, 2, 8, 6}}, {1}, {}};
  LabelledBoxes predictions{{{3, 2, 9, 6}}, {2}, {0.87}};
  const Image picture = draw_detections(image, truth, predictions, {"square", "circle"});
  CHECK(picture.width == 260);  // zoomed 13x to reach 256 pixels
  TempDir dir;
  write_png(picture, dir.file("drawn.png"));
  CHECK(read_image(dir.file("drawn.png")) == picture);
}

TEST_CASE("values/image: draw_line includes both ends and cuts far-away ends to the image") {
  const Color red{255, 0, 0};
  Image image(10, 10);
  draw_line(image, 1, 1, 8, 4, red);
  CHECK(image.color_at(1, 1) == red);
  CHECK(image.color_at(8, 4) == red);
  int64_t drawn = 0;
  for (int64_t x = 0; x < 10; ++x) drawn += image.color_at(x, 2) == red || image.color_at(x, 3) == red;
  CHECK(drawn >= 4);  // one pixel per column between the ends: a shallow line steps along x
  Image far(10, 10);
  // A horizontal line from -10^15 to +10^15 through row 5: clipped first, so it is quick and exact.
  draw_line(far, -1000000000000000, 5, 1000000000000000, 5, red, 2);
  for (int64_t x = 0; x < 10; ++x) {
    CHECK(far.color_at(x, 5) == red);
    CHECK(far.color_at(x, 6) == red);  // thickness 2 grows down
    CHECK(far.color_at(x, 4) == Color{});
  }
  Image untouched(10, 10);
  draw_line(untouched, -5, -5, -1, 20, red, 1);
  CHECK(untouched == Image(10, 10));
}

TEST_CASE("errors/image: unreadable files say why") {
  TempDir dir;
  CHECK_THROWS_CONTAINING(read_image(dir.file("absent.png")), "cannot open");
  CHECK_THROWS_CONTAINING(read_image(dir.write("text.png", "hello world")), "neither a PNG nor a JPEG");
  CHECK_THROWS_CONTAINING(read_image(dir.write("cut.jpg", "\xff\xd8\xff\xe0 cut short")), "read_jpeg: cannot decode");
  CHECK_THROWS_CONTAINING(write_png(Image(), dir.file("empty.png")), "empty image");
  CHECK_THROWS_CONTAINING(tensor_to_image(minidet::zeros({2, 4, 4})), "expected a (3, H, W) tensor");
}
