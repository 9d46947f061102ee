// AnchorGenerator: torchvision's cell anchors and grid order for a known case, rounding half to even,
// strides from the image size, several levels, the cache, CUDA parity and errors.
#include <vector>

#include "core/factories.h"
#include "models/anchors/anchor_generator.h"
#include "tests/support.h"

using namespace minidet;
using models::AnchorGenerator;

namespace {

std::vector<double> row(const Tensor& anchors, int64_t index) {
  return anchors.narrow(0, index, 1).to_vector<double>();
}

}  // namespace

TEST_CASE("values/anchor_generator: torchvision cell anchors for sizes 16 32 64 and ratios 0.5 1 2") {
  AnchorGenerator generator({{16, 32, 64}}, {{0.5, 1.0, 2.0}});
  CHECK(generator.num_anchors_per_location(0) == 9);
  const Tensor cell = generator.cell_anchors(0);
  CHECK(cell.sizes() == Shape{9, 4});
  CHECK(cell.dtype() == kFloat32);
  // torchvision.models.detection.anchor_utils.AnchorGenerator(((16, 32, 64),), ((0.5, 1.0, 2.0),))
  // .cell_anchors[0]: ratio-major, sizes inner, rounded half to even.
  const std::vector<float> expected = {-11, -6,  11, 6,  -23, -11, 23, 11, -45, -23, 45, 23,
                                       -8,  -8,  8,  8,  -16, -16, 16, 16, -32, -32, 32, 32,
                                       -6,  -11, 6,  11, -11, -23, 11, 23, -23, -45, 23, 45};
  CHECK(cell.to_vector<float>() == expected);
}

TEST_CASE("values/anchor_generator: half sizes round half to even like torch.round") {
  // Size 25, ratio 1: half-width 12.5 rounds to 12 (and -12.5 to -12); size 27: 13.5 rounds to 14.
  AnchorGenerator generator({{25, 27}}, {{1.0}});
  CHECK(generator.cell_anchors(0, kFloat64).to_vector<double>() ==
        std::vector<double>{-12, -12, 12, 12, -14, -14, 14, 14});
}

TEST_CASE("values/anchor_generator: grid order and strides from the image size") {
  AnchorGenerator generator({{16, 32, 64}}, {{0.5, 1.0, 2.0}});
  // Image 32 x 48, feature map 4 x 6: stride 8 both ways. Anchor a at cell (y, x) is row (y * 6 + x) * 9 + a.
  const Tensor anchors = generator.anchors(32, 48, {{4, 6}});
  CHECK(anchors.sizes() == Shape{4 * 6 * 9, 4});
  CHECK(row(anchors, 0) == std::vector<double>{-11, -6, 11, 6});
  // Cell (1, 2) has offset (x, y) = (16, 8); anchor 4 is ratio 1, size 32: (-16, -16, 16, 16).
  CHECK(row(anchors, (1 * 6 + 2) * 9 + 4) == std::vector<double>{0, -8, 32, 24});
  // The last anchor: cell (3, 5), offset (40, 24), anchor 8 = ratio 2, size 64.
  CHECK(row(anchors, 4 * 6 * 9 - 1) == std::vector<double>{40 - 23, 24 - 45, 40 + 23, 24 + 45});
  // Different strides along y and x: image 30 x 64 over 3 x 8 cells is stride (10, 8), integer division.
  AnchorGenerator one({{10}}, {{1.0}});
  const Tensor grid = one.anchors(31, 64, {{3, 8}});
  CHECK(grid.sizes() == Shape{24, 4});
  CHECK(row(grid, 2 * 8 + 3) == std::vector<double>{3 * 8 - 5, 2 * 10 - 5, 3 * 8 + 5, 2 * 10 + 5});
  CHECK(!grid.requires_grad());
}

TEST_CASE("values/anchor_generator: several levels concatenate and the cache reuses tensors") {
  AnchorGenerator generator({{16}, {32, 64}}, {{1.0}, {0.5, 1.0, 2.0}});
  CHECK(generator.num_levels() == 2);
  CHECK(generator.num_anchors_per_location(1) == 6);
  const Tensor anchors = generator.anchors(64, 64, {{8, 8}, {4, 4}}, kFloat64);
  CHECK(anchors.sizes() == Shape{8 * 8 * 1 + 4 * 4 * 6, 4});
  CHECK(anchors.dtype() == kFloat64);
  // Level 1 starts after level 0's 64 anchors, with stride 16: its first anchor is ratio 0.5, size 32.
  CHECK(row(anchors, 64) == std::vector<double>{-23, -11, 23, 11});
  CHECK(generator.cache_size() == 2);
  const Tensor again = generator.grid_anchors(0, 8, 8, 8, 8, kFloat64);
  CHECK(again.is_same(generator.grid_anchors(0, 8, 8, 8, 8, kFloat64)));
  // Shared with every later caller, so read-only in fact.
  CHECK_THROWS_CONTAINING(again.fill_(0.0), "AnchorGenerator's cached grid anchors");
  CHECK(generator.cache_size() == 2);
  (void)generator.grid_anchors(0, 8, 8, 8, 8, kFloat32);  // another dtype: another entry
  (void)generator.anchors(64, 64, {{16, 16}, {4, 4}}, kFloat64);  // another feature size on level 0
  CHECK(generator.cache_size() == 4);
}

TEST_CASE("errors/anchor_generator: no anchors bad values and mismatched levels") {
  CHECK_THROWS_CONTAINING(AnchorGenerator({}, {}), "expected sizes for at least one feature level");
  CHECK_THROWS_CONTAINING(AnchorGenerator({{}}, {{1.0}}), "level 0 has no sizes");
  CHECK_THROWS_CONTAINING(AnchorGenerator({{16}}, {{}}), "level 0 has no aspect ratios");
  CHECK_THROWS_CONTAINING(AnchorGenerator({{16}}, {{0.0}}), "expected positive finite aspect ratios");
  CHECK_THROWS_CONTAINING(AnchorGenerator({{-16}}, {{1.0}}), "expected positive finite sizes");
  CHECK_THROWS_CONTAINING(AnchorGenerator({{16}, {32}}, {{1.0}}), "one list of aspect ratios per level");
  AnchorGenerator generator({{16}}, {{1.0}});
  CHECK_THROWS_CONTAINING(generator.anchors(32, 32, {{4, 4}, {2, 2}}), "expected 1 feature map sizes");
  CHECK_THROWS_CONTAINING(generator.anchors(32, 32, {{0, 4}}), "expected a feature map between 1 x 1");
  CHECK_THROWS_CONTAINING(generator.anchors(32, 32, {{64, 4}}), "expected a feature map between 1 x 1");
  CHECK_THROWS_CONTAINING(generator.anchors(0, 32, {{4, 4}}), "expected a non-empty image");
  CHECK_THROWS_CONTAINING(generator.grid_anchors(0, 4, 4, 0, 8), "expected positive strides");
  CHECK_THROWS_CONTAINING(generator.num_anchors_per_location(1), "level 1 out of range");
  CHECK_THROWS_CONTAINING(generator.cell_anchors(0, kInt64), "expected a floating dtype");
}

MINIDET_CUDA_TEST_CASE("cuda/anchor_generator: made on the device equal to the CPU and cached per device") {
  AnchorGenerator generator({{16, 32, 64}, {128}}, {{0.5, 1.0, 2.0}, {1.0}});
  const std::vector<std::pair<int64_t, int64_t>> features = {{16, 20}, {4, 5}};
  const Tensor on_cpu = generator.anchors(128, 160, features);
  const Tensor on_gpu = generator.anchors(128, 160, features, TensorOptions(kFloat32, Device::cuda()));
  CHECK(on_gpu.is_cuda());
  CHECK(on_gpu.to_vector<float>() == on_cpu.to_vector<float>());
  CHECK(generator.cache_size() == 4);
  CHECK(generator.grid_anchors(1, 4, 5, 32, 32, TensorOptions(kFloat32, Device::cuda())).is_cuda());
  CHECK(generator.cache_size() == 4);
}
