// sort and argsort: stable order, NaN and signed zeros, any dim, the permutation gradient, CPU vs CUDA.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/sort/sort.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {

using Longs = std::vector<int64_t>;

Longs indices_of(const Tensor& t) { return t.cpu().to_vector<int64_t>(); }

// Bits of every float element, so that -0.0 vs +0.0 and NaN payloads count as differences.
std::vector<uint32_t> float_bits(const Tensor& t) {
  std::vector<uint32_t> bits;
  for (float v : t.cpu().to_vector<float>()) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    bits.push_back(b);
  }
  return bits;
}

// Element for element identical, NaN and the sign of zero included (as float64 on the host: the conversion
// keeps both, and an int64 or uint8 value exactly).
bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.detach().cpu().to_vector<double>(), y = b.detach().cpu().to_vector<double>();
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0);
}

// sort on CUDA against the CPU: identical indices, identical value bits, and (for floating x) the same input
// gradient for a random upstream gradient.
void check_cuda_sort(const Tensor& x_host, int64_t dim, bool descending) {
  CAPTURE(dim);
  CAPTURE(descending);
  CAPTURE(x_host.sizes());
  const bool floating = is_floating(x_host.dtype());
  Tensor x_cpu = x_host.detach().clone(), x_gpu = x_host.detach().cuda();
  if (floating) {
    x_cpu.requires_grad_();
    x_gpu.requires_grad_();
  }
  const ValuesIndices cpu = sort(x_cpu, dim, descending), gpu = sort(x_gpu, dim, descending);
  REQUIRE(gpu.values.is_cuda());
  CHECK(indices_of(gpu.indices) == indices_of(cpu.indices));
  CHECK(same_bits(gpu.values, cpu.values));
  CHECK(indices_of(argsort(x_gpu.detach(), dim, descending)) == indices_of(cpu.indices));
  if (!floating || x_host.numel() == 0) return;
  const Tensor up = randn(x_host.sizes(), x_host.dtype());
  cpu.values.backward(up);
  gpu.values.backward(up.cuda());
  CHECK(test::allclose(x_gpu.grad(), x_cpu.grad(), 0, 0));
}

}  // namespace

// ---- values ---------------------------------------------------------------------------------------------------

TEST_CASE("values/sort: ascending and descending with ties in input order") {
  const Tensor x = from_vector<float>({3, 1, 2, 1, 3});
  ValuesIndices up = sort(x), down = sort(x, 0, /*descending=*/true);
  CHECK(up.values.to_vector<float>() == std::vector<float>{1, 1, 2, 3, 3});
  CHECK(indices_of(up.indices) == Longs{1, 3, 2, 0, 4});
  // Descending keeps equal values in input order too (it is not the ascending order reversed).
  CHECK(down.values.to_vector<float>() == std::vector<float>{3, 3, 2, 1, 1});
  CHECK(indices_of(down.indices) == Longs{0, 4, 2, 1, 3});
  CHECK(indices_of(argsort(x, -1, true)) == Longs{0, 4, 2, 1, 3});
  CHECK(up.indices.dtype() == kInt64);
}

TEST_CASE("values/sort: NaN is largest and signed zeros tie") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // -nan has its sign bit set; it still counts as NaN, equal to the other NaN.
  const Tensor x = from_vector<float>({nan, 1, -nan, -inf, inf, -0.0f, 0.0f});
  CHECK(indices_of(sort(x).indices) == Longs{3, 5, 6, 1, 4, 0, 2});
  CHECK(indices_of(sort(x, 0, true).indices) == Longs{0, 2, 4, 1, 5, 6, 3});
  // The values are x's own elements: the -0.0 keeps its sign.
  const std::vector<float> v = sort(x).values.to_vector<float>();
  CHECK(std::signbit(v[1]));
  CHECK_FALSE(std::signbit(v[2]));
  CHECK(std::isnan(v[5]));
  CHECK(std::isnan(v[6]));
  CHECK(std::signbit(v[6]));  // the -nan, second NaN in input order
}

TEST_CASE("values/sort: any dim of a non-contiguous tensor and integer dtypes") {
  // base (2, 3): [[5, 2, 9], [1, 7, 2]]; x = base transposed (3, 2), not contiguous.
  const Tensor base = from_vector<double>({5, 2, 9, 1, 7, 2}, {2, 3});
  const Tensor x = base.t();
  REQUIRE_FALSE(x.is_contiguous());
  // Along dim 0 of x = along each row of base.
  const ValuesIndices d0 = sort(x, 0);
  CHECK(d0.values.sizes() == Shape{3, 2});
  CHECK(d0.values.to_vector<double>() == std::vector<double>{2, 1, 5, 2, 9, 7});
  CHECK(indices_of(d0.indices) == Longs{1, 0, 0, 2, 2, 1});
  // Along dim 1: each pair (base[0, j], base[1, j]).
  const ValuesIndices d1 = sort(x, 1, true);
  CHECK(d1.values.to_vector<double>() == std::vector<double>{5, 1, 7, 2, 9, 2});
  CHECK(indices_of(d1.indices) == Longs{0, 1, 1, 0, 0, 1});
  CHECK(indices_of(sort(from_vector<int64_t>({4, -2, 4, 0})).indices) == Longs{1, 3, 0, 2});
  CHECK(indices_of(sort(from_vector<int64_t>({4, 2, 4, 0}).to(kUInt8), 0, true).indices) == Longs{0, 2, 1, 3});
}

TEST_CASE("values/sort: 0-dim and empty tensors") {
  const ValuesIndices scalar = sort(scalar_tensor(2.5));
  CHECK(scalar.values.dim() == 0);
  CHECK(scalar.values.item<double>() == 2.5);
  CHECK(scalar.indices.item<int64_t>() == 0);
  const ValuesIndices none = sort(zeros({3, 0}), 1);
  CHECK(none.values.sizes() == Shape{3, 0});
  CHECK(none.indices.sizes() == Shape{3, 0});
  Tensor leaf = zeros({0, 4}).requires_grad_();
  sort(leaf, 0).values.backward(zeros({0, 4}));
  CHECK(leaf.grad().sizes() == Shape{0, 4});
}

TEST_CASE("values/sort: the gradient goes back to where each value came from") {
  Tensor x = from_vector<double>({3, 1, 2}).requires_grad_();
  sort(x).values.backward(from_vector<double>({10, 20, 30}));  // sorted: 1 (from 1), 2 (from 2), 3 (from 0)
  CHECK(x.grad().to_vector<double>() == std::vector<double>{30, 10, 20});
}

// ---- gradcheck ------------------------------------------------------------------------------------------------

TEST_CASE("gradcheck/sort: every dim of a non-contiguous input in both directions") {
  // Random normals are distinct with probability 1, so no tie sits near a finite-difference step.
  Generator g(7);
  const Tensor base = randn({5, 4, 3}, kFloat64, &g);
  Tensor x;
  {
    NoGradGuard raw;
    x = base.permute({2, 1, 0});  // (3, 4, 5), every dim strided
  }
  x.requires_grad_();
  double worst = 0;
  for (int64_t dim : {0, 1, 2}) {
    for (bool descending : {false, true}) {
      CAPTURE(dim);
      CAPTURE(descending);
      const auto result = autograd::gradcheck(
          [=](const TensorList& in) { return sort(in[0], dim, descending).values; }, {x});
      CHECK_MESSAGE(result.ok, result.report);
      worst = std::max(worst, result.max_abs_error);
    }
  }
  MESSAGE("gradcheck/sort max abs error: " << worst);
  // The analytic gradient is a permutation of the upstream gradient, so it is not all zero.
  Tensor y = sort(x, 1).values;
  y.backward(ones(y.sizes(), kFloat64));
  CHECK(x.grad().to_vector<double>() == std::vector<double>(60, 1.0));
}

// ---- errors ---------------------------------------------------------------------------------------------------

TEST_CASE("errors/sort: bool input bad dim and undefined tensor") {
  CHECK_THROWS_CONTAINING(sort(zeros({3}, kBool)), "sort: expected a numeric tensor, got dtype bool");
  CHECK_THROWS_CONTAINING(argsort(zeros({3}, kBool)), "argsort: expected a numeric tensor");
  CHECK_THROWS_CONTAINING(sort(zeros({2, 3}), 2), "sort");
  CHECK_THROWS_CONTAINING(sort(zeros({2, 3}), -3), "sort");
  CHECK_THROWS_CONTAINING(sort(Tensor()), "sort: input is an undefined tensor");
}

// ---- cuda -----------------------------------------------------------------------------------------------------

MINIDET_CUDA_TEST_CASE("cuda/sort: one long row with many ties in both directions") {
  for (int64_t n : {1, 5, 1000, 20000, 200000}) {
    // Four distinct values only: every element ties with about n / 4 others, so stability decides the order.
    const Tensor ties = randint(0, 4, {n}).to(kFloat32);
    for (bool descending : {false, true}) {
      check_cuda_sort(ties, 0, descending);
      check_cuda_sort(randn({n}), 0, descending);
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/sort: many rows along every dim and non-contiguous inputs") {
  const Tensor ties = randint(0, 3, {7, 300, 5}).to(kFloat32);
  for (int64_t dim : {0, 1, 2}) {
    for (bool descending : {false, true}) {
      check_cuda_sort(ties, dim, descending);
      check_cuda_sort(ties.to(kFloat64), dim, descending);
      check_cuda_sort(randn({7, 300, 5}).permute({2, 0, 1}), dim, descending);
    }
  }
  // Rows longer than one CUB tile and many short rows.
  check_cuda_sort(randint(0, 50, {3, 70000}).to(kFloat32), 1, true);
  check_cuda_sort(randint(0, 2, {5000, 3}).to(kFloat32), 1, false);
}

MINIDET_CUDA_TEST_CASE("cuda/sort: rows at the one-block limit and past it keep ties in order") {
  // 512 and 4,096 are the two block sizes' capacities; 513 and 4,097 are one past; 2,304 is a detector row.
  for (int64_t n : {2, 512, 513, 2304, 4096, 4097}) {
    CAPTURE(n);
    for (bool descending : {false, true}) {
      check_cuda_sort(randint(0, 3, {8, n}).to(kFloat32), 1, descending);
      check_cuda_sort(randint(-2, 2, {3, n}), 1, descending);           // int64: the padding key is a real key
      check_cuda_sort(randint(0, 256, {2, n}).to(kUInt8), 1, descending);  // uint8: 0 and 255 pad
    }
  }
  // The padding keys themselves in a row: int64 max sorts last ascending, int64 min first descending.
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  for (bool descending : {false, true})
    check_cuda_sort(from_vector<int64_t>({big, 0, small, big, small, 0, big}, {1, 7}), 1, descending);
}

MINIDET_CUDA_TEST_CASE("cuda/sort: NaN and signed zeros give the CPU order and bits") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor x = from_vector<float>({nan, 1, -nan, -inf, inf, -0.0f, 0.0f, -0.0f, 3, nan}, {2, 5});
  for (bool descending : {false, true}) {
    for (int64_t dim : {0, 1}) {
      check_cuda_sort(x, dim, descending);
      CHECK(float_bits(sort(x.cuda(), dim, descending).values) == float_bits(sort(x, dim, descending).values));
    }
    check_cuda_sort(x.flatten(), 0, descending);
    CHECK(float_bits(sort(x.flatten().cuda(), 0, descending).values) ==
          float_bits(sort(x.flatten(), 0, descending).values));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/sort: integer dtypes 0-dim and empty tensors") {
  for (bool descending : {false, true}) {
    check_cuda_sort(randint(-3, 3, {4, 1000}), 1, descending);
    check_cuda_sort(randint(0, 255, {2, 513}).to(kUInt8), 1, descending);
    check_cuda_sort(randint(0, 255, {3000}).to(kUInt8), 0, descending);
    check_cuda_sort(scalar_tensor(1.5), 0, descending);
    check_cuda_sort(zeros({0, 6}), 1, descending);
    check_cuda_sort(zeros({4, 0}), 1, descending);
  }
}

MINIDET_CUDA_TEST_CASE("cuda/sort: the same bits twice") {
  const Tensor x = randint(0, 3, {4, 5000}).to(kFloat32).cuda();
  const ValuesIndices a = sort(x, 1, true), b = sort(x, 1, true);
  CHECK(indices_of(a.indices) == indices_of(b.indices));
  CHECK(float_bits(a.values) == float_bits(b.values));
}

MINIDET_CUDA_TEST_CASE("cuda/sort: topk on CUDA is the sort cut to k with signed zeros tied as on the CPU") {
  const Tensor x = from_vector<float>({0.0f, -0.0f, 1, -0.0f, 0.0f, -1}, {1, 6});
  for (bool largest : {true, false}) {
    CAPTURE(largest);
    CHECK(indices_of(topk(x.cuda(), 5, 1, largest).indices) == indices_of(topk(x, 5, 1, largest).indices));
    CHECK(indices_of(topk(x.cuda(), 5, 1, largest).indices) ==
          indices_of(sort(x, 1, largest).indices.narrow(1, 0, 5)));
  }
}
