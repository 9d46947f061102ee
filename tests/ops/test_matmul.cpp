// Matrix products: mm, bmm, matmul (vectors, batches, broadcasting) and linear.
#include <omp.h>

#include <atomic>
#include <cmath>
#include <functional>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/matmul/gemm.h"
#include "ops/matmul/linear.h"
#include "ops/matmul/matmul.h"
#include "ops/matmul/packed_gemm.h"
#include "ops/shape/views.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {

Tensor leaf(const Shape& shape, uint64_t seed) { return test::random_leaf(shape, seed); }

// The transpose of a fresh (cols, rows) leaf: a (rows, cols) input with swapped strides.
Tensor transposed_leaf(int64_t rows, int64_t cols, uint64_t seed) {
  Generator g(seed);
  Tensor t = randn({cols, rows}, kFloat64, &g).t();
  t.requires_grad_();
  return t;
}

void expect_gradcheck(const char* what, const autograd::GradcheckFn& fn, const TensorList& inputs) {
  const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs);
  CHECK_MESSAGE(r.ok, std::string(what) << ": " << r.report);
  MESSAGE(std::string(what) << ": max_abs_error " << r.max_abs_error);
}

// fn on float32 CPU copies and on CUDA copies of `inputs`; outputs and gradients (for a random upstream
// gradient) must agree within the tolerances.
void check_cuda_matches_cpu(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                            double rtol, double atol) {
  TensorList cpu, gpu;
  for (const Tensor& t : inputs) {
    Tensor c = t.to(kFloat32), d = t.to(TensorOptions(kFloat32, Device::cuda()));
    c.requires_grad_();
    d.requires_grad_();
    cpu.push_back(c);
    gpu.push_back(d);
  }
  const Tensor y_cpu = fn(cpu), y_gpu = fn(gpu);
  REQUIRE(y_gpu.is_cuda());
  CHECK(test::allclose(y_gpu, y_cpu, rtol, atol));
  Generator g(7);
  const Tensor upstream = randn(y_cpu.sizes(), kFloat32, &g);
  autograd::backward({y_cpu}, {upstream});
  autograd::backward({y_gpu}, {upstream.cuda()});
  for (size_t i = 0; i < cpu.size(); ++i) {
    CAPTURE(i);
    REQUIRE(cpu[i].grad().defined());
    REQUIRE(gpu[i].grad().defined());
    CHECK(gpu[i].grad().is_cuda());
    CHECK(test::allclose(gpu[i].grad(), cpu[i].grad(), rtol, atol));
  }
}

Tensor product(const TensorList& in) { return matmul(in[0], in[1]); }

}  // namespace

// ---- gradcheck ------------------------------------------------------------------------------------------

TEST_CASE("gradcheck/matmul: 2-D times 2-D with contiguous and transposed operands") {
  expect_gradcheck("matmul 2-D", product, {leaf({4, 3}, 1), leaf({3, 5}, 2)});
  expect_gradcheck("matmul 2-D transposed", product, {transposed_leaf(4, 3, 3), transposed_leaf(3, 5, 4)});
  // A sliced operand: every other row of a (8, 3) leaf, so rows are 6 elements apart.
  Generator g(5);
  Tensor rows = randn({8, 3}, kFloat64, &g).slice(0, 0, 8, 2);
  rows.requires_grad_();
  expect_gradcheck("matmul 2-D sliced", product, {rows, leaf({3, 2}, 6)});
}

TEST_CASE("gradcheck/matmul: vector cases") {
  // The 0-dim dot product is viewed as (1,): gradcheck builds its upstream gradient with from_vector,
  // which turns an empty shape into a 1-D tensor.
  expect_gradcheck("matmul dot", [](const TensorList& in) { return reshape(matmul(in[0], in[1]), {1}); },
                   {leaf({5}, 10), leaf({5}, 11)});
  expect_gradcheck("matmul vector-matrix", product, {leaf({4}, 12), leaf({4, 3}, 13)});
  expect_gradcheck("matmul matrix-vector", product, {leaf({3, 4}, 14), leaf({4}, 15)});
  expect_gradcheck("matmul batch-vector", product, {leaf({2, 3, 4}, 16), leaf({4}, 17)});
  expect_gradcheck("matmul vector-batch", product, {leaf({3}, 18), leaf({2, 3, 4}, 19)});
}

TEST_CASE("gradcheck/matmul: batched with broadcasting") {
  expect_gradcheck("matmul 3-D x 3-D", product, {leaf({2, 3, 4}, 20), leaf({2, 4, 5}, 21)});
  expect_gradcheck("matmul 3-D x 2-D", product, {leaf({2, 3, 4}, 22), leaf({4, 2}, 23)});
  expect_gradcheck("matmul 2-D x 3-D", product, {leaf({3, 4}, 24), leaf({2, 4, 2}, 25)});
  expect_gradcheck("matmul broadcast batch", product, {leaf({2, 1, 3, 4}, 26), leaf({3, 4, 2}, 27)});
  // Transposed matrix dims inside a batch.
  Generator g(28);
  Tensor bt = randn({2, 5, 4}, kFloat64, &g).transpose(1, 2);
  bt.requires_grad_();
  expect_gradcheck("matmul batch transposed", product, {leaf({2, 3, 4}, 29), bt});
}

TEST_CASE("gradcheck/bmm: batched products and one side only") {
  expect_gradcheck("bmm", [](const TensorList& in) { return bmm(in[0], in[1]); },
                   {leaf({3, 2, 4}, 30), leaf({3, 4, 3}, 31)});
  Generator g(32);
  const Tensor constant = randn({3, 4, 3}, kFloat64, &g);  // needs no gradient: bmm saves only what it needs
  expect_gradcheck("bmm a only", [](const TensorList& in) { return bmm(in[0], in[1]); },
                   {leaf({3, 2, 4}, 33), constant});
}

TEST_CASE("gradcheck/linear: with and without bias and leading dims") {
  auto with_bias = [](const TensorList& in) { return linear(in[0], in[1], in[2]); };
  auto without_bias = [](const TensorList& in) { return linear(in[0], in[1]); };
  expect_gradcheck("linear 2-D", with_bias, {leaf({4, 3}, 40), leaf({5, 3}, 41), leaf({5}, 42)});
  expect_gradcheck("linear no bias", without_bias, {leaf({4, 3}, 43), leaf({2, 3}, 44)});
  expect_gradcheck("linear 3-D x", with_bias, {leaf({2, 3, 4}, 45), leaf({3, 4}, 46), leaf({3}, 47)});
  expect_gradcheck("linear 1-D x", with_bias, {leaf({4}, 48), leaf({3, 4}, 49), leaf({3}, 50)});
  expect_gradcheck("linear transposed x", with_bias,
                   {transposed_leaf(4, 3, 51), leaf({2, 3}, 52), leaf({2}, 53)});
}

// ---- values ---------------------------------------------------------------------------------------------

TEST_CASE("values/matmul: hand-computed products") {
  const Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector<double>({1, 0, 0, 1, 1, 1}, {3, 2});
  // rows of a times columns of b: (1+3, 2+3), (4+6, 5+6)
  CHECK(matmul(a, b).to_vector<double>() == std::vector<double>{4, 5, 10, 11});
  CHECK(mm(a, b).sizes() == Shape{2, 2});
  const Tensor v = from_vector<double>({1, -1, 2}, {3});
  CHECK(matmul(a, v).to_vector<double>() == std::vector<double>{5, 11});  // 1-2+6, 4-5+12
  const Tensor dot = matmul(v, v);
  CHECK(dot.dim() == 0);
  CHECK(dot.item() == 6.0);
  CHECK(matmul(from_vector<double>({1, 1}, {2}), a).to_vector<double>() == std::vector<double>{5, 7, 9});
  // Broadcast batch: (2, 1, 2, 3) @ (3, 3, 2) -> (2, 3, 2, 2)
  CHECK(matmul(zeros({2, 1, 2, 3}), zeros({3, 3, 2})).sizes() == Shape{2, 3, 2, 2});
}

TEST_CASE("values/matmul: batched products give the same bits on 1 to 4 threads") {
  // Threads take whole products when the batch shares out evenly, else a panel of rows or columns of each:
  // both must give the bits of one thread, so that results do not depend on the machine's core count.
  // K = 700 is long enough for both CPU GEMMs (Eigen's, the packed one) to cut the sum over k into blocks.
  const int threads_before = omp_get_max_threads();
  for (int64_t batch : {1, 2, 3, 8}) {
    for (bool a_t : {false, true}) {
      for (bool b_t : {false, true}) {
        CAPTURE(batch);
        CAPTURE(a_t);
        CAPTURE(b_t);
      for (const auto& [m, n] : {std::pair<int64_t, int64_t>{70, 300}, {300, 70}, {32, 1000}}) {
        CAPTURE(m);
        const int64_t k = 700;
        Generator g(batch);
        const Tensor a = a_t ? transpose(randn({batch, k, m}, kFloat32, &g), 1, 2) : randn({batch, m, k}, kFloat32, &g);
        const Tensor b = b_t ? transpose(randn({batch, n, k}, kFloat32, &g), 1, 2) : randn({batch, k, n}, kFloat32, &g);
        omp_set_num_threads(1);
        const std::vector<float> one = bmm(a, b).to_vector<float>();
        for (int threads : {2, 3, 4}) {
          CAPTURE(threads);
          omp_set_num_threads(threads);
          CHECK(bmm(a, b).to_vector<float>() == one);
        }
      }
      }
    }
  }
  omp_set_num_threads(threads_before);
}

// A float32 operand as stored: (rows, cols), or (cols, rows) when the product reads it transposed.
struct Stored {
  Tensor data;
  bool transposed;
  ops::detail::PackedGemmOperand at(int64_t row, int64_t col) const {  // the operand from op(X)(row, col) on
    const int64_t ld = data.size(1);
    const float* p = data.data<float>() + (transposed ? col * ld + row : row * ld + col);
    return {p, ld, transposed};
  }
  Tensor as_read() const { return transposed ? data.t() : data; }  // op(X), a view
};

Stored stored(int64_t rows, int64_t cols, bool transposed, Generator* g) {
  return {transposed ? randn({cols, rows}, kFloat32, g) : randn({rows, cols}, kFloat32, g), transposed};
}

TEST_CASE("values/matmul: the packed float GEMM agrees with float64 on every transpose, edge tile and block of k") {
  // ops/matmul/packed_gemm.h works in register tiles (6 x 16 or 8 x 32, by the CPU) and in blocks of k of equal
  // length. Sizes below, at and past a tile, a block of rows (96), a block of k (256, and 288 = two blocks of 144)
  // and a block of columns (4096) must all give alpha A B + beta C within float rounding of the float64 product;
  // beta = 0 must not read C (NaN there).
  struct Case {
    int64_t m, n, k;
  };
  const std::vector<Case> cases = {{1, 1, 1},     {5, 7, 3},     {6, 16, 256}, {8, 32, 288},
                                   {12, 32, 257}, {13, 33, 700}, {97, 50, 40}, {9, 65, 520},
                                   {200, 3, 513}, {3, 4100, 9},  {40, 17, 1},  {4, 5, 0}};
  for (const Case& c : cases) {
    for (bool a_t : {false, true}) {
      for (bool b_t : {false, true}) {
        for (const auto& [alpha, beta] : {std::pair<double, double>{1.0, 0.0}, {-2.0, 0.0}, {-0.5, 1.0}, {2.0, 0.25}}) {
          CAPTURE(c.m);
          CAPTURE(c.n);
          CAPTURE(c.k);
          CAPTURE(a_t);
          CAPTURE(b_t);
          CAPTURE(alpha);
          CAPTURE(beta);
          Generator g(static_cast<uint64_t>(c.m * 7919 + c.n * 31 + c.k));
          const Stored a = stored(c.m, c.k, a_t, &g), b = stored(c.k, c.n, b_t, &g);
          const Tensor c0 = randn({c.m, c.n}, kFloat32, &g);
          Tensor out = beta == 0.0 ? full({c.m, c.n}, std::nan(""), kFloat32) : c0.clone();
          ops::detail::packed_gemm(c.m, c.n, c.k, a.at(0, 0), b.at(0, 0), out.data<float>(), c.n,
                                   static_cast<float>(alpha), static_cast<float>(beta));
          Tensor want = c0.to(kFloat64);
          ops::gemm(a.as_read().to(kFloat64), b.as_read().to(kFloat64), want, alpha, beta);
          // Each float product rounds at 2^-24 relative, and a sum of k of them drifts by about sqrt(k) of that.
          CHECK(test::allclose(out, want, 1e-5, 1e-5 * std::sqrt(static_cast<double>(c.k + 1))));
        }
      }
    }
  }
}

TEST_CASE("values/matmul: the packed float GEMM gives the same bits for any cut of the rows and columns") {
  // Threads share a product by cutting C into panels, and a panel's edge falls elsewhere in the register tiles
  // than the whole product's: every element must still take the same arithmetic.
  for (bool a_t : {false, true}) {
    for (bool b_t : {false, true}) {
      CAPTURE(a_t);
      CAPTURE(b_t);
      Generator g(a_t * 2 + b_t);
      const int64_t m = 37, n = 45, k = 600;
      const Stored a = stored(m, k, a_t, &g), b = stored(k, n, b_t, &g);
      Tensor whole = empty({m, n});
      ops::detail::packed_gemm(m, n, k, a.at(0, 0), b.at(0, 0), whole.data<float>(), n, 1.0f, 0.0f);
      for (const auto& [lo, hi] : {std::pair<int64_t, int64_t>{5, 30}, {1, 2}, {11, 37}}) {
        CAPTURE(lo);
        Tensor rows = empty({hi - lo, n}), cols = empty({m, hi - lo});
        ops::detail::packed_gemm(hi - lo, n, k, a.at(lo, 0), b.at(0, 0), rows.data<float>(), n, 1.0f, 0.0f);
        ops::detail::packed_gemm(m, hi - lo, k, a.at(0, 0), b.at(0, lo), cols.data<float>(), hi - lo, 1.0f, 0.0f);
        CHECK(rows.to_vector<float>() == slice(whole, 0, lo, hi).contiguous().to_vector<float>());
        CHECK(cols.to_vector<float>() == slice(whole, 1, lo, hi).contiguous().to_vector<float>());
      }
    }
  }
}

// A stored matrix S served a segment of a row at a time, as the CPU's convolution serves its columns.
struct StoredRows final : ops::detail::RowSource {
  explicit StoredRows(Tensor s) : s(std::move(s)) {}
  void row(int64_t r, int64_t c0, int64_t count, float* out) const override {
    copy(s.data<float>(), r, c0, count, out);
  }
  void row(int64_t r, int64_t c0, int64_t count, double* out) const override {
    copy(s.data<double>(), r, c0, count, out);
  }
  template <typename T>
  void copy(const T* data, int64_t r, int64_t c0, int64_t count, T* out) const {
    if (r < 0 || r >= s.size(0) || c0 < 0 || c0 + count > s.size(1)) {
      asked_past_s = true;
      return;
    }
    std::copy(data + r * s.size(1) + c0, data + r * s.size(1) + c0 + count, out);
  }
  Tensor s;
  mutable std::atomic<bool> asked_past_s{false};  // set from any thread, checked after the product
};

TEST_CASE("values/matmul: a B that is never stored gives the bits of the same B stored") {
  // gemm.h's SourceOperand: product i reads S's block at row row0 + i * batch_rows and column col0 + i *
  // batch_cols, as is or transposed. Packed straight from the source (float32) or written out first (float64),
  // each product must give the bits of the stored block: on one thread, and on three, which cut a product into
  // panels of columns (40 x 200) or of rows (200 x 40); past one block of columns of the packed GEMM (4200).
  struct Case {
    int64_t batch, m, n, k;
  };
  for (const Case& c :
       {Case{3, 8, 32, 288}, Case{2, 13, 45, 300}, Case{1, 37, 70, 9}, Case{4, 5, 3, 600}, Case{1, 40, 200, 64},
        Case{2, 24, 130, 100}, Case{1, 200, 40, 64}, Case{1, 8, 4200, 40}, Case{2, 3, 5, 0}}) {
    for (DType dtype : {kFloat32, kFloat64}) {
      for (bool transposed : {false, true}) {
        for (int threads : {1, 3}) {
          CAPTURE(c.m);
          CAPTURE(c.n);
          CAPTURE(c.k);
          CAPTURE(dtype);
          CAPTURE(transposed);
          CAPTURE(threads);
          Generator g(static_cast<uint64_t>(c.m * 131 + c.n * 7 + c.k));
          const int64_t block_rows = transposed ? c.n : c.k, block_cols = transposed ? c.k : c.n;
          ops::SourceOperand b;
          b.row0 = 3;
          b.col0 = 5;
          b.batch_rows = 2;
          b.batch_cols = block_cols + 2;
          b.transposed = transposed;
          const StoredRows source(randn(
              {b.row0 + (c.batch - 1) * b.batch_rows + block_rows + 1, b.col0 + c.batch * b.batch_cols}, dtype, &g));
          b.source = &source;
          const Tensor a = randn({c.batch, c.m, c.k}, dtype, &g), c0 = randn({c.batch, c.m, c.n}, dtype, &g);
          Tensor got = c0.clone();
          const int before = omp_get_max_threads();
          omp_set_num_threads(threads);
          ops::gemm_batched(a, b, got, -0.5, 1.0);
          omp_set_num_threads(before);
          CHECK_FALSE(source.asked_past_s);
          for (int64_t i = 0; i < c.batch; ++i) {
            const int64_t r0 = b.row0 + i * b.batch_rows, col0 = b.col0 + i * b.batch_cols;
            const Tensor block = slice(slice(source.s, 0, r0, r0 + block_rows), 1, col0, col0 + block_cols);
            Tensor want = c0.select(0, i).clone();
            ops::gemm(a.select(0, i), transposed ? block.t() : block, want, -0.5, 1.0);
            CHECK(test::max_abs_diff(got.select(0, i), want) == 0.0);
          }
        }
      }
    }
  }
  const StoredRows source(zeros({4, 4}));
  CHECK_THROWS_CONTAINING(ops::gemm_batched(zeros({1, 2, 4}), ops::SourceOperand{&source}, zeros({2, 2, 4})),
                          "do not match");
  if (test::cuda_available())
    CHECK_THROWS_CONTAINING(ops::gemm_batched(zeros({1, 2, 4}, Device::cuda()), ops::SourceOperand{&source},
                                              zeros({1, 2, 4}, Device::cuda())),
                            "CPU only");
}

TEST_CASE("values/matmul: gradients by hand and empty shapes") {
  Tensor a = from_vector<double>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector<double>({5, 6, 7, 8}, {2, 2});
  a.requires_grad_();
  b.requires_grad_();
  autograd::backward({matmul(a, b)}, {ones({2, 2}, kFloat64)});
  // dA = 1 B^T: row sums of B, dB = A^T 1: column sums of A, repeated.
  CHECK(a.grad().to_vector<double>() == std::vector<double>{11, 15, 11, 15});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{4, 4, 6, 6});
  // k = 0 gives zeros; m = 0 gives an empty result.
  CHECK(matmul(zeros({3, 0}), zeros({0, 2})).to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(matmul(zeros({0, 4}), zeros({4, 2})).sizes() == Shape{0, 2});
  CHECK(bmm(zeros({0, 2, 3}), zeros({0, 3, 4})).sizes() == Shape{0, 2, 4});
}

TEST_CASE("values/linear: bias and empty inputs") {
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {2, 2});
  const Tensor w = from_vector<double>({1, 0, 1, 1, 0, 2}, {3, 2});
  const Tensor b = from_vector<double>({10, 20, 30}, {3});
  CHECK(linear(x, w, b).to_vector<double>() == std::vector<double>{11, 23, 34, 13, 27, 38});
  CHECK(linear(x, w).sizes() == Shape{2, 3});
  // No rows: empty output, and a zero weight gradient with a bias gradient of zero.
  Tensor wl = w.clone(), bl = b.clone();
  wl.requires_grad_();
  bl.requires_grad_();
  const Tensor y = linear(zeros({0, 2}, kFloat64), wl, bl);
  CHECK(y.sizes() == Shape{0, 3});
  autograd::backward({y}, {zeros({0, 3}, kFloat64)});
  CHECK(wl.grad().to_vector<double>() == std::vector<double>(6, 0.0));
  CHECK(bl.grad().to_vector<double>() == std::vector<double>(3, 0.0));
}

// ---- errors ---------------------------------------------------------------------------------------------

TEST_CASE("errors/matmul: shape dtype and device mismatches") {
  CHECK_THROWS_CONTAINING(matmul(zeros({2, 3}), zeros({4, 2})), "cannot be multiplied");
  CHECK_THROWS_CONTAINING(matmul(zeros({2, 3}), zeros({3, 2}, kFloat64)), "same dtype");
  CHECK_THROWS_CONTAINING(matmul(zeros({2, 3}, kInt64), zeros({3, 2}, kInt64)), "float32 or float64");
  CHECK_THROWS_CONTAINING(matmul(zeros({}), zeros({3})), "at least 1 dim");
  CHECK_THROWS_CONTAINING(matmul(zeros({2, 2, 3}), zeros({3, 3, 2})), "matmul");  // batch 2 vs 3
  CHECK_THROWS_CONTAINING(mm(zeros({2, 3, 1}), zeros({3, 2})), "expected 2-D");
  CHECK_THROWS_CONTAINING(bmm(zeros({2, 2, 3}), zeros({3, 3, 2})), "batch sizes differ");
  CHECK_THROWS_CONTAINING(bmm(zeros({2, 2, 3}), zeros({2, 4, 2})), "cannot be multiplied");
  if (test::cuda_available())
    CHECK_THROWS_CONTAINING(matmul(zeros({2, 3}), zeros({3, 2}, Device::cuda())), "same device");
}

TEST_CASE("errors/linear: bad weight and bias shapes") {
  CHECK_THROWS_CONTAINING(linear(zeros({2, 3}), zeros({4, 5})), "weight expects 5");
  CHECK_THROWS_CONTAINING(linear(zeros({2, 3}), zeros({3})), "expected weight of shape");
  CHECK_THROWS_CONTAINING(linear(zeros({2, 3}), zeros({4, 3}), zeros({3})), "expected bias of shape");
  CHECK_THROWS_CONTAINING(linear(zeros({2, 3}), zeros({4, 3}, kFloat64)), "same dtype");
}

// ---- cuda -----------------------------------------------------------------------------------------------

// float32 sums of k products: errors grow like sqrt(k) * eps * |terms|; 1e-4 covers k = 129 with N(0,1).
MINIDET_CUDA_TEST_CASE("cuda/matmul: a 257x129x65 product and its gradients match the CPU") {
  Generator g(60);
  check_cuda_matches_cpu(product, {randn({257, 129}, kFloat64, &g), randn({129, 65}, kFloat64, &g)}, 1e-4, 1e-4);
}

MINIDET_CUDA_TEST_CASE("cuda/matmul: vectors batches broadcasting and transposed operands") {
  Generator g(61);
  check_cuda_matches_cpu(product, {randn({7}, kFloat64, &g), randn({7}, kFloat64, &g)}, 1e-5, 1e-5);
  check_cuda_matches_cpu(product, {randn({3, 7}, kFloat64, &g), randn({7}, kFloat64, &g)}, 1e-5, 1e-5);
  check_cuda_matches_cpu(product, {randn({2, 3, 5, 7}, kFloat64, &g), randn({3, 7, 4}, kFloat64, &g)}, 1e-5, 1e-5);
  check_cuda_matches_cpu(product, {randn({4, 5, 7}, kFloat64, &g), randn({7, 6}, kFloat64, &g)}, 1e-5, 1e-5);
  check_cuda_matches_cpu([](const TensorList& in) { return matmul(transpose(in[0], 0, 1), in[1]); },
                         {randn({7, 5}, kFloat64, &g), randn({7, 3}, kFloat64, &g)}, 1e-5, 1e-5);
}

MINIDET_CUDA_TEST_CASE("cuda/bmm: batched products match the CPU") {
  Generator g(62);
  check_cuda_matches_cpu([](const TensorList& in) { return bmm(in[0], in[1]); },
                         {randn({6, 33, 17}, kFloat64, &g), randn({6, 17, 9}, kFloat64, &g)}, 1e-5, 1e-5);
}

MINIDET_CUDA_TEST_CASE("cuda/linear: forward and backward match the CPU including empty inputs") {
  Generator g(63);
  auto fn = [](const TensorList& in) { return linear(in[0], in[1], in[2]); };
  check_cuda_matches_cpu(fn, {randn({2, 9, 33}, kFloat64, &g), randn({17, 33}, kFloat64, &g),
                              randn({17}, kFloat64, &g)}, 1e-5, 1e-5);
  check_cuda_matches_cpu(fn, {randn({0, 33}, kFloat64, &g), randn({17, 33}, kFloat64, &g),
                              randn({17}, kFloat64, &g)}, 1e-5, 1e-5);
  check_cuda_matches_cpu(product, {randn({0, 5}, kFloat64, &g), randn({5, 3}, kFloat64, &g)}, 1e-5, 1e-5);
}
