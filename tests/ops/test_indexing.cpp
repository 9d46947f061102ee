// Indexing ops: index_select, gather (scatter-add backward, deterministic mode), where, masked_fill.
#include <functional>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "ops/elementwise/compare.h"
#include "ops/indexing/indexing.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {

Tensor leaf(const Shape& shape, uint64_t seed) { return test::random_leaf(shape, seed); }

// A (4, 3, 5) input stored as a permuted (5, 4, 3) buffer.
Tensor permuted_leaf(uint64_t seed) {
  Generator g(seed);
  Tensor t = randn({5, 4, 3}, kFloat64, &g).permute({1, 2, 0});
  t.requires_grad_();
  return t;
}

Tensor random_mask(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return gt(rand(shape, kFloat64, &g), 0.5);
}

void expect_gradcheck(const char* what, const autograd::GradcheckFn& fn, const TensorList& inputs) {
  const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs);
  CHECK_MESSAGE(r.ok, std::string(what) << ": " << r.report);
  MESSAGE(std::string(what) << ": max_abs_error " << r.max_abs_error);
}

// Runs fn on float32 CPU inputs and on their CUDA copies (floating inputs require grad, others are
// constants), backward with one random upstream gradient, and returns {output, grads...} of both runs.
std::pair<TensorList, TensorList> run_both(const std::function<Tensor(const TensorList&)>& fn,
                                           const TensorList& inputs) {
  TensorList cpu, gpu;
  for (const Tensor& t : inputs) {
    Tensor c = is_floating(t.dtype()) ? t.to(kFloat32) : t.clone();
    Tensor d = c.cuda();
    if (is_floating(t.dtype())) {
      c.requires_grad_();
      d.requires_grad_();
    }
    cpu.push_back(c);
    gpu.push_back(d);
  }
  const Tensor y_cpu = fn(cpu), y_gpu = fn(gpu);
  Generator g(99);
  const Tensor upstream = randn(y_cpu.sizes(), kFloat32, &g);
  autograd::backward({y_cpu}, {upstream});
  autograd::backward({y_gpu}, {upstream.cuda()});
  TensorList out_cpu{y_cpu}, out_gpu{y_gpu};
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (!cpu[i].requires_grad()) continue;
    out_cpu.push_back(cpu[i].grad());
    out_gpu.push_back(gpu[i].grad());
  }
  return {out_cpu, out_gpu};
}

void check_cuda_matches_cpu(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                            double tolerance) {
  const auto [cpu, gpu] = run_both(fn, inputs);
  for (size_t i = 0; i < cpu.size(); ++i) {
    CAPTURE(i);
    REQUIRE(gpu[i].defined());
    CHECK(gpu[i].is_cuda());
    CHECK(test::allclose(gpu[i], cpu[i], tolerance, tolerance));
  }
}

}  // namespace

// ---- gradcheck ------------------------------------------------------------------------------------------

TEST_CASE("gradcheck/index_select: each dim with repeated indices and a permuted input") {
  const Tensor index = from_vector<int64_t>({2, 0, 2, 3}, {4});
  for (int64_t dim : {0, 1, -1}) {
    CAPTURE(dim);
    auto fn = [dim, index](const TensorList& in) { return index_select(in[0], dim, index.narrow(0, 0, 3)); };
    expect_gradcheck("index_select", fn, {leaf({4, 3, 5}, 1)});
    expect_gradcheck("index_select permuted", fn, {permuted_leaf(2)});
  }
  expect_gradcheck("index_select 0-dim index",
                   [](const TensorList& in) { return index_select(in[0], 1, scalar_tensor(1, kInt64)); },
                   {leaf({2, 3}, 3)});
}

TEST_CASE("gradcheck/gather: repeated indices and an index smaller than x") {
  Generator g(4);
  const Tensor index = randint(0, 3, {4, 5, 5}, kInt64, &g);
  for (int64_t dim : {0, 1, 2}) {
    CAPTURE(dim);
    // index (4, 5, 5) clipped to fit x (4, 3, 5) in every dim but `dim`; values < 3 fit every dim of x.
    Shape fit = {4, 3, 5};
    fit[dim] = 5;
    Tensor idx = index;
    for (int64_t d = 0; d < 3; ++d) idx = idx.narrow(d, 0, std::min<int64_t>(fit[d], idx.size(d)));
    if (dim != 1) idx = idx.narrow(1, 0, 2);  // smaller than x in a non-gathered dim
    auto fn = [dim, idx](const TensorList& in) { return gather(in[0], dim, idx); };
    expect_gradcheck("gather", fn, {leaf({4, 3, 5}, 5)});
    expect_gradcheck("gather permuted", fn, {permuted_leaf(6)});
  }
}

TEST_CASE("gradcheck/where: broadcast condition and operands") {
  const Tensor cond = random_mask({3, 1}, 7);
  auto fn = [cond](const TensorList& in) { return where(cond, in[0], in[1]); };
  expect_gradcheck("where broadcast", fn, {leaf({3, 4}, 8), leaf({4}, 9)});
  // A transposed a, and b broadcast along the other dim.
  const Tensor full_cond = random_mask({3, 4}, 10);
  Generator g(11);
  Tensor a = randn({4, 3}, kFloat64, &g).t();
  a.requires_grad_();
  expect_gradcheck("where transposed", [full_cond](const TensorList& in) { return where(full_cond, in[0], in[1]); },
                   {a, leaf({3, 1}, 12)});
}

TEST_CASE("gradcheck/masked_fill: a broadcast mask") {
  const Tensor mask = random_mask({4}, 13);
  expect_gradcheck("masked_fill", [mask](const TensorList& in) { return masked_fill(in[0], mask, 2.5); },
                   {leaf({3, 4}, 14)});
}

// ---- values ---------------------------------------------------------------------------------------------

TEST_CASE("values/index_select: rows and columns and the scatter-add backward") {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor rows = from_vector<int64_t>({2, 0, 2}, {3});
  CHECK(index_select(x, 0, rows).to_vector<double>() == std::vector<double>{5, 6, 1, 2, 5, 6});
  CHECK(index_select(x, 1, from_vector<int64_t>({1}, {1})).to_vector<double>() == std::vector<double>{2, 4, 6});
  CHECK(index_select(from_vector<int64_t>({7, 8, 9}, {3}), 0, rows).to_vector<int64_t>() ==
        std::vector<int64_t>{9, 7, 9});  // integer tensors select too
  CHECK(index_select(x, 0, zeros({0}, kInt64)).sizes() == Shape{0, 2});
  Tensor w = x.clone();
  w.requires_grad_();
  autograd::backward({index_select(w, 0, rows)}, {from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2})});
  // Row 2 was picked twice: it gets (1 + 5, 2 + 6); row 0 gets (3, 4); row 1 nothing.
  CHECK(w.grad().to_vector<double>() == std::vector<double>{3, 4, 0, 0, 6, 8});
}

TEST_CASE("values/gather: along rows and columns") {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor index = from_vector<int64_t>({2, 2, 0, 1}, {2, 2});
  CHECK(gather(x, 1, index).to_vector<double>() == std::vector<double>{3, 3, 4, 5});
  CHECK(gather(x, 0, from_vector<int64_t>({1, 0}, {1, 2})).to_vector<double>() == std::vector<double>{4, 2});
  Tensor w = x.clone();
  w.requires_grad_();
  autograd::backward({gather(w, 1, index)}, {ones({2, 2}, kFloat64)});
  CHECK(w.grad().to_vector<double>() == std::vector<double>{0, 0, 2, 1, 1, 0});
}

TEST_CASE("values/where: selection and gradient split") {
  const Tensor cond = from_vector<bool>({true, false, true}, {3});
  Tensor a = from_vector<double>({1, 2, 3}, {3}), b = scalar_tensor(-1, kFloat64);
  a.requires_grad_();
  b.requires_grad_();
  const Tensor y = where(cond, a, b);
  CHECK(y.to_vector<double>() == std::vector<double>{1, -1, 3});
  autograd::backward({y}, {from_vector<double>({10, 20, 30}, {3})});
  CHECK(a.grad().to_vector<double>() == std::vector<double>{10, 0, 30});
  CHECK(b.grad().item() == 20.0);  // b was broadcast: its gradient is the sum where cond is false
}

TEST_CASE("values/masked_fill: filled positions get no gradient") {
  Tensor x = from_vector<double>({1, 2, 3, 4}, {2, 2});
  x.requires_grad_();
  const Tensor y = masked_fill(x, from_vector<bool>({false, true}, {2}), -9);
  CHECK(y.to_vector<double>() == std::vector<double>{1, -9, 3, -9});
  autograd::backward({y}, {ones({2, 2}, kFloat64)});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 0, 1, 0});
  CHECK(masked_fill(zeros({0, 2}), from_vector<bool>({true, false}, {2}), 1).sizes() == Shape{0, 2});
}

// ---- errors ---------------------------------------------------------------------------------------------

TEST_CASE("errors/index_select: bad index values dtypes and shapes") {
  const Tensor x = zeros({3, 2});
  CHECK_THROWS_CONTAINING(index_select(x, 0, from_vector<int64_t>({0, 5}, {2})),
                          "index_select: index 5 at position 1 is out of range for dim 0 of size 3 (valid range 0 to 2)");
  CHECK_THROWS_CONTAINING(index_select(x, 1, from_vector<int64_t>({-1}, {1})), "index -1");
  CHECK_THROWS_CONTAINING(index_select(x, 0, zeros({2})), "dtype int64");
  CHECK_THROWS_CONTAINING(index_select(x, 0, zeros({1, 1}, kInt64)), "1-D index");
  CHECK_THROWS_CONTAINING(index_select(x, 2, zeros({1}, kInt64)), "out of range");
  CHECK_THROWS_CONTAINING(index_select(zeros({0, 2}), 0, zeros({1}, kInt64)), "no index is valid");
  if (test::cuda_available())
    CHECK_THROWS_CONTAINING(index_select(x, 0, zeros({1}, TensorOptions(kInt64, Device::cuda()))), "same device");
}

TEST_CASE("errors/gather: bad index values and shapes") {
  const Tensor x = zeros({2, 3});
  CHECK_THROWS_CONTAINING(gather(x, 1, from_vector<int64_t>({0, 3}, {1, 2})), "index 3 at position 1");
  CHECK_THROWS_CONTAINING(gather(x, 1, zeros({2}, kInt64)), "as many dims as x");
  CHECK_THROWS_CONTAINING(gather(x, 1, zeros({3, 1}, kInt64)), "larger than x");
  CHECK_THROWS_CONTAINING(gather(x, 0, zeros({1, 1})), "dtype int64");
}

TEST_CASE("errors/where: condition dtype shapes and operand mismatch") {
  CHECK_THROWS_CONTAINING(where(zeros({2}), zeros({2}), zeros({2})), "cond of dtype bool");
  CHECK_THROWS_CONTAINING(where(random_mask({3}, 1), zeros({2}), zeros({2})), "where");
  CHECK_THROWS_CONTAINING(where(random_mask({2}, 1), zeros({2}), zeros({2}, kFloat64)), "same dtype");
  CHECK_THROWS_CONTAINING(masked_fill(zeros({2, 3}), random_mask({2}, 1), 0), "does not broadcast");
  CHECK_THROWS_CONTAINING(masked_fill(zeros({2}), zeros({2}, kInt64), 0), "mask of dtype bool");
}

// ---- cuda -----------------------------------------------------------------------------------------------

// Selection copies values exactly, and each gradient element is a sum of a few float32 terms.
MINIDET_CUDA_TEST_CASE("cuda/index_select: forward and backward match the CPU including empty") {
  Generator g(20);
  const Tensor x = randn({7, 5, 6}, kFloat64, &g);
  for (int64_t dim : {0, 1, 2}) {
    CAPTURE(dim);
    const Tensor index = randint(0, x.size(dim), {9}, kInt64, &g);
    check_cuda_matches_cpu([dim](const TensorList& in) { return index_select(in[0], dim, in[1]); }, {x, index},
                           1e-6);
  }
  check_cuda_matches_cpu([](const TensorList& in) { return index_select(in[0], 0, in[1]); },
                         {x, zeros({0}, kInt64)}, 1e-6);
}

MINIDET_CUDA_TEST_CASE("cuda/gather: forward and backward match the CPU including empty") {
  Generator g(21);
  const Tensor x = randn({6, 5, 4}, kFloat64, &g);
  check_cuda_matches_cpu([](const TensorList& in) { return gather(in[0], 1, in[1]); },
                         {x, randint(0, 5, {6, 8, 3}, kInt64, &g)}, 1e-6);
  check_cuda_matches_cpu([](const TensorList& in) { return gather(in[0], 0, in[1]); },
                         {x, randint(0, 6, {0, 5, 4}, kInt64, &g)}, 1e-6);
}

MINIDET_CUDA_TEST_CASE("cuda/where: where and masked_fill match the CPU") {
  Generator g(22);
  const Tensor cond = random_mask({5, 1, 3}, 23);
  check_cuda_matches_cpu([](const TensorList& in) { return where(in[2], in[0], in[1]); },
                         {randn({4, 3}, kFloat64, &g), randn({5, 4, 1}, kFloat64, &g), cond}, 0);
  check_cuda_matches_cpu([](const TensorList& in) { return masked_fill(in[0], in[1], -3); },
                         {randn({5, 4, 3}, kFloat64, &g), random_mask({4, 3}, 24)}, 0);
}

MINIDET_CUDA_TEST_CASE("cuda/index_select: deterministic mode gives identical bits twice and the CPU bits") {
  // 4096 picks of 64 rows: every row's gradient is a sum of about 64 float32 terms, in an order that
  // atomicAdd would not fix.
  Generator g(25);
  const Tensor x = randn({64, 32}, kFloat64, &g);
  const Tensor index = randint(0, 64, {4096}, kInt64, &g);
  DeterministicGuard deterministic;
  auto fn = [](const TensorList& in) { return index_select(in[0], 0, in[1]); };
  const auto [cpu1, gpu1] = run_both(fn, {x, index});
  const auto [cpu2, gpu2] = run_both(fn, {x, index});
  CHECK(test::max_abs_diff(gpu1[1], gpu2[1]) == 0.0);
  CHECK(test::max_abs_diff(gpu1[1], cpu1[1]) == 0.0);  // same summation order as the CPU loop
}

MINIDET_CUDA_TEST_CASE("cuda/gather: deterministic mode gives identical bits twice and the CPU bits") {
  Generator g(26);
  const Tensor x = randn({8, 16}, kFloat64, &g);
  const Tensor index = randint(0, 8, {512, 16}, kInt64, &g);
  DeterministicGuard deterministic;
  auto fn = [](const TensorList& in) { return gather(in[0], 0, in[1]); };
  const auto [cpu1, gpu1] = run_both(fn, {x, index});
  const auto [cpu2, gpu2] = run_both(fn, {x, index});
  CHECK(test::max_abs_diff(gpu1[1], gpu2[1]) == 0.0);
  CHECK(test::max_abs_diff(gpu1[1], cpu1[1]) == 0.0);
}

MINIDET_CUDA_TEST_CASE("cuda/index_select: the atomic path agrees with the CPU within rounding") {
  Generator g(27);
  const Tensor x = randn({64, 32}, kFloat64, &g);
  check_cuda_matches_cpu([](const TensorList& in) { return index_select(in[0], 0, in[1]); },
                         {x, randint(0, 64, {4096}, kInt64, &g)}, 1e-4);
}
