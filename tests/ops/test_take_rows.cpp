// take_rows (ops/take_rows/take_rows.h): the picked rows, the bad inputs, and CUDA against the CPU.
#include <cmath>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "core/grad_mode.h"
#include "ops/indexing/gather.h"
#include "ops/take_rows/take_rows.h"
#include "tests/support.h"

using namespace minidet;

TEST_CASE("values/take_rows: row index[b, t] of image b, repeats and any order, as gather with the index expanded") {
  // x: 2 images of 3 rows of 2 columns, values 10 * image + row + column / 10.
  const Tensor x = from_vector<double>({0.0, 0.1, 1.0, 1.1, 2.0, 2.1, 10.0, 10.1, 11.0, 11.1, 12.0, 12.1}, {2, 3, 2});
  const Tensor index = from_vector<int64_t>({2, 0, 2, 1, 1, 0}, {2, 3});
  const Tensor y = take_rows(x, index);
  CHECK(y.sizes() == Shape{2, 3, 2});
  CHECK(y.to_vector<double>() == std::vector<double>{2.0, 2.1, 0.0, 0.1, 2.0, 2.1, 11.0, 11.1, 11.0, 11.1, 10.0, 10.1});
  // The same as gather along dim 1 with each row's index repeated over the columns.
  const Tensor expanded = index.unsqueeze(2).expand({2, 3, 2}).contiguous();
  CHECK(y.to_vector<double>() == gather(x, 1, expanded).to_vector<double>());
  // Non-contiguous inputs, float32, and empty picks.
  const Tensor xt = from_vector<float>({1, 2, 3, 4, 5, 6}, {1, 2, 3}).transpose(1, 2);  // (1, 3, 2)
  CHECK(take_rows(xt, from_vector<int64_t>({1}, {1, 1})).to_vector<float>() == std::vector<float>{2, 5});
  CHECK(take_rows(x, zeros({2, 0}, kInt64)).sizes() == Shape{2, 0, 2});
  CHECK(take_rows(zeros({0, 3, 4}, kFloat64), zeros({0, 5}, kInt64)).sizes() == Shape{0, 5, 4});
}

TEST_CASE("errors/take_rows: shapes, dtypes, an index out of range and a tensor that requires grad are refused") {
  const Tensor x = zeros({2, 3, 4}, kFloat64);
  CHECK_THROWS_CONTAINING(take_rows(zeros({3, 4}, kFloat64), zeros({3, 1}, kInt64)), "x of shape (B, K, C)");
  CHECK_THROWS_CONTAINING(take_rows(zeros({2, 3, 4}, kInt64), zeros({2, 1}, kInt64)), "floating x");
  CHECK_THROWS_CONTAINING(take_rows(x, zeros({1, 2}, kInt64)), "index of shape (B, T) with B = 2");
  CHECK_THROWS_CONTAINING(take_rows(x, zeros({2, 2}, kUInt8)), "int64 index");
  CHECK_THROWS_CONTAINING(take_rows(x, from_vector<int64_t>({0, 3}, {2, 1})), "index 3 at (1, 0) is outside [0, 3)");
  CHECK_THROWS_CONTAINING(take_rows(x, from_vector<int64_t>({-1, 0}, {2, 1})), "index -1 at (0, 0)");
  CHECK_THROWS_CONTAINING(take_rows(zeros({2, 0, 4}, kFloat64), zeros({2, 1}, kInt64)), "no rows (K = 0)");
  Tensor w = zeros({1, 2, 2}, kFloat64);
  w.requires_grad_();
  CHECK_THROWS_CONTAINING(take_rows(w, zeros({1, 1}, kInt64)), "use gather");
  NoGradGuard no_grad;  // outside grad mode a parameter's values may be read
  CHECK(take_rows(w, zeros({1, 1}, kInt64)).sizes() == Shape{1, 1, 2});
}

MINIDET_CUDA_TEST_CASE("cuda/take_rows: the CPU's rows, and a row of NaN for an index out of range") {
  Generator g(7);
  const Tensor x = randn({3, 50, 9}, kFloat32, &g);
  const Tensor index = randint(0, 50, {3, 40}, kInt64, &g);
  CHECK(take_rows(x.cuda(), index.cuda()).cpu().to_vector<float>() == take_rows(x, index).to_vector<float>());
  const Tensor x64 = randn({2, 5, 4}, kFloat64, &g);
  const Tensor bad = from_vector<int64_t>({4, 5, -1, 0}, {2, 2});
  const std::vector<double> rows = take_rows(x64.cuda(), bad.cuda()).cpu().to_vector<double>();
  for (int c = 0; c < 4; ++c) {
    CHECK(rows[c] == x64.to_vector<double>()[4 * 4 + c]);  // image 0, row 4: in range
    CHECK(std::isnan(rows[4 + c]));                        // image 0, index 5: out of range
    CHECK(std::isnan(rows[8 + c]));                        // image 1, index -1
    CHECK(rows[12 + c] == x64.to_vector<double>()[20 + c]);  // image 1, row 0
  }
}
