// nonzero / flat_nonzero: coordinates and flat indices of the non-zero elements, CPU and CUDA (cub).
#include <cmath>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/indexing/nonzero.h"
#include "tests/support.h"

using namespace minidet;

TEST_CASE("values/nonzero: coordinates in row-major order for bool float and int64") {
  const Tensor mask = from_vector<bool>({false, true, false, true, true, false}, {2, 3});
  const Tensor coords = nonzero(mask);
  CHECK(coords.dtype() == kInt64);
  CHECK(coords.sizes() == Shape{3, 2});
  CHECK(coords.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0, 1, 1});
  CHECK(flat_nonzero(mask).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 4});
  // NaN counts as non-zero, -0.0 as zero (as in PyTorch).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(flat_nonzero(from_vector<double>({0.0, -0.0, nan, 2.5, 0.0})).to_vector<int64_t>() ==
        std::vector<int64_t>{2, 3});
  CHECK(nonzero(from_vector<int64_t>({0, 7, 0, -1})).to_vector<int64_t>() == std::vector<int64_t>{1, 3});
  CHECK(nonzero(from_vector<int64_t>({0, 7, 0, -1})).sizes() == Shape{2, 1});
  // Three dims: (1, 2, 0) is flat index 1*9 + 2*3 + 0 = 15 in a (2, 3, 3) tensor.
  Tensor cube = zeros({2, 3, 3});
  cube.view({-1}).narrow(0, 15, 1).fill_(1.0);
  CHECK(nonzero(cube).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0});
}

TEST_CASE("values/nonzero: empty all-zero 0-dim and non-contiguous inputs") {
  CHECK(nonzero(zeros({0, 3})).sizes() == Shape{0, 2});
  CHECK(nonzero(zeros({4})).sizes() == Shape{0, 1});
  CHECK(flat_nonzero(zeros({4})).sizes() == Shape{0});
  CHECK(nonzero(scalar_tensor(3.0)).sizes() == Shape{1, 0});
  CHECK(nonzero(scalar_tensor(0.0)).sizes() == Shape{0, 0});
  // The transpose of [[1, 0], [0, 2], [3, 0]] is [[1, 0, 3], [0, 2, 0]].
  const Tensor t = from_vector<double>({1, 0, 0, 2, 3, 0}, {3, 2}).t();
  CHECK(nonzero(t).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 2, 1, 1});
}

TEST_CASE("errors/nonzero: undefined input") {
  CHECK_THROWS_CONTAINING(nonzero(Tensor()), "nonzero: x is an undefined tensor");
  CHECK_THROWS_CONTAINING(flat_nonzero(Tensor()), "flat_nonzero: x is an undefined tensor");
}

MINIDET_CUDA_TEST_CASE("cuda/nonzero: matches the CPU for masks floats and integers of many sizes") {
  for (int64_t n : {1, 31, 1000, 123457, 3000000}) {
    CAPTURE(n);
    Generator g(static_cast<uint64_t>(n));
    const Tensor values = rand({n}, kFloat32, &g);
    const Tensor mask = gt(values, 0.7);
    CHECK(flat_nonzero(mask.cuda()).to_vector<int64_t>() == flat_nonzero(mask).to_vector<int64_t>());
    const Tensor sparse_floats = mul(values, mask.to(kFloat32));
    CHECK(flat_nonzero(sparse_floats.cuda()).to_vector<int64_t>() == flat_nonzero(sparse_floats).to_vector<int64_t>());
  }
  Generator g(5);
  const Tensor ints = randint(0, 3, {7, 11, 13}, kInt64, &g);
  const Tensor on_gpu = nonzero(ints.cuda());
  CHECK(on_gpu.is_cuda());
  CHECK(on_gpu.sizes() == nonzero(ints).sizes());
  CHECK(on_gpu.to_vector<int64_t>() == nonzero(ints).to_vector<int64_t>());
  CHECK(nonzero(zeros({5, 0}, Device::cuda())).sizes() == Shape{0, 2});
  CHECK(nonzero(zeros({5, 2}, Device::cuda())).sizes() == Shape{0, 2});
  CHECK(nonzero(ones({3, 2}, TensorOptions(kUInt8, Device::cuda()))).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 0, 1, 1, 0, 1, 1, 2, 0, 2, 1});
}
