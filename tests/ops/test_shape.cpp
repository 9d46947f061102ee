// Differentiable shape ops: views (sharing storage), copies and conversions, cat and stack.
#include <functional>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "ops/shape/shape.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {

Tensor leaf(const Shape& shape, uint64_t seed) { return test::random_leaf(shape, seed); }

// A (2, 3, 4) input laid out as a permuted (4, 2, 3) buffer: no dim is contiguous with its neighbour.
Tensor permuted_leaf(uint64_t seed) {
  Generator g(seed);
  Tensor t = randn({4, 2, 3}, kFloat64, &g).permute({1, 2, 0});
  t.requires_grad_();
  return t;
}

void expect_gradcheck(const char* what, const autograd::GradcheckFn& fn, const TensorList& inputs,
                      const autograd::GradcheckOptions& options = {}) {
  const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs, options);
  CHECK_MESSAGE(r.ok, std::string(what) << ": " << r.report);
  MESSAGE(std::string(what) << ": max_abs_error " << r.max_abs_error);
}

using UnaryShapeFn = std::function<Tensor(const Tensor&)>;
struct ShapeCase {
  const char* name;
  UnaryShapeFn fn;
};

// Every single-input shape op on a (2, 3, 4) input.
const std::vector<ShapeCase>& shape_cases() {
  static const std::vector<ShapeCase> cases = {
      {"view", [](const Tensor& x) { return view(contiguous(x), {6, -1}); }},
      {"reshape", [](const Tensor& x) { return reshape(x, {4, 6}); }},
      {"flatten", [](const Tensor& x) { return flatten(x, 1); }},
      {"permute", [](const Tensor& x) { return permute(x, {2, 0, 1}); }},
      {"transpose", [](const Tensor& x) { return transpose(x, 0, -1); }},
      {"slice", [](const Tensor& x) { return slice(x, 2, 1, 4, 2); }},
      {"slice negative", [](const Tensor& x) { return slice(x, 1, -2, 100); }},
      {"narrow", [](const Tensor& x) { return narrow(x, 1, 1, 2); }},
      {"select", [](const Tensor& x) { return select(x, 1, -1); }},
      {"expand", [](const Tensor& x) { return expand(unsqueeze(x, 1), {2, 3, 3, 4}); }},
      {"expand new dims", [](const Tensor& x) { return expand(select(x, 0, 1), {2, 2, 3, 4}); }},
      {"squeeze", [](const Tensor& x) { return squeeze(unsqueeze(x, 0)); }},
      {"squeeze dim", [](const Tensor& x) { return squeeze(narrow(x, 2, 1, 1), 2); }},
      {"unsqueeze", [](const Tensor& x) { return unsqueeze(x, -1); }},
      // Transposed first so that contiguous has something to copy (on a contiguous input it returns the
      // input itself, see values/shape).
      {"contiguous", [](const Tensor& x) { return contiguous(transpose(x, 0, 2)); }},
      {"clone", [](const Tensor& x) { return clone(x); }},
  };
  return cases;
}

}  // namespace

// ---- gradcheck ------------------------------------------------------------------------------------------

TEST_CASE("gradcheck/shape: every view and copy on contiguous and permuted inputs") {
  for (const ShapeCase& c : shape_cases()) {
    const std::string op = c.name;
    CAPTURE(op);
    const UnaryShapeFn fn = c.fn;
    expect_gradcheck(c.name, [fn](const TensorList& in) { return fn(in[0]); }, {leaf({2, 3, 4}, 1)});
    expect_gradcheck(c.name, [fn](const TensorList& in) { return fn(in[0]); }, {permuted_leaf(2)});
  }
}

TEST_CASE("gradcheck/shape: a chain of views used twice sums both paths") {
  // y = x[:, 1:] * permute(x)[...]: two views of one leaf, so the gradients of both paths add up.
  auto fn = [](const TensorList& in) {
    const Tensor a = slice(in[0], 1, 1, 3);                      // (3, 2)
    const Tensor b = transpose(narrow(in[0], 0, 0, 2), 0, 1);   // (3, 2)
    return mul(a, b);
  };
  expect_gradcheck("views twice", fn, {leaf({3, 3}, 3)});
}

TEST_CASE("gradcheck/to: dtype round trip") {
  // The float32 stage rounds every evaluation to ~1e-7, so the step must be large: the function is linear,
  // so a large step costs no accuracy.
  autograd::GradcheckOptions options;
  options.eps = 1e-2;
  options.atol = 1e-4;
  expect_gradcheck("to float32 and back",
                   [](const TensorList& in) { return to(mul(to(in[0], kFloat32), 2.0), kFloat64); },
                   {leaf({3, 2}, 4)}, options);
}

TEST_CASE("gradcheck/cat: along each dim with non-contiguous and empty pieces") {
  auto fn1 = [](const TensorList& in) { return cat({in[0], in[1], in[2]}, 1); };
  Generator g(5);
  Tensor t = randn({4, 2}, kFloat64, &g).t();  // (2, 4) transposed
  t.requires_grad_();
  expect_gradcheck("cat dim 1", fn1, {leaf({2, 3}, 6), t, leaf({2, 0}, 7)});
  auto fn0 = [](const TensorList& in) { return cat({in[0], in[1]}, -2); };
  expect_gradcheck("cat dim 0", fn0, {leaf({1, 3}, 8), leaf({2, 3}, 9)});
}

TEST_CASE("gradcheck/stack: new leading and trailing dims") {
  auto fn0 = [](const TensorList& in) { return stack({in[0], in[1], in[2]}, 0); };
  auto fn_last = [](const TensorList& in) { return stack({in[0], in[1]}, -1); };
  expect_gradcheck("stack dim 0", fn0, {leaf({2, 3}, 10), leaf({2, 3}, 11), leaf({2, 3}, 12)});
  expect_gradcheck("stack last dim", fn_last, {permuted_leaf(13), permuted_leaf(14)});
}

// ---- values ---------------------------------------------------------------------------------------------

TEST_CASE("values/shape: views share storage with their input") {
  Tensor x = arange(12, kFloat64).view({3, 4});
  x.requires_grad_();
  const Tensor t = transpose(x, 0, 1), s = select(x, 0, 1), sl = slice(x, 1, 1, 4, 2);
  const Tensor e = expand(select(x, 1, 0), {2, 3});
  for (const Tensor& v : {t, s, sl, e}) {
    CHECK(v.storage() == x.storage());
    CHECK(v.grad_fn() != nullptr);
  }
  CHECK(x.is_leaf());
  CHECK(s.to_vector<double>() == std::vector<double>{4, 5, 6, 7});
  CHECK(sl.to_vector<double>() == std::vector<double>{1, 3, 5, 7, 9, 11});
  {
    NoGradGuard writing;  // a leaf that requires grad is written only outside grad mode
    x.select(0, 1).fill_(-1);
  }
  CHECK(s.to_vector<double>() == std::vector<double>{-1, -1, -1, -1});
  CHECK(select(t, 0, 2).to_vector<double>() == std::vector<double>{2, -1, 10});
  CHECK(e.to_vector<double>() == std::vector<double>{0, -1, 8, 0, -1, 8});
  // A view that needs no copy is a view; reshape of a transposed tensor has to copy.
  CHECK(reshape(x, {2, 6}).storage() == x.storage());
  CHECK(reshape(t, {12}).storage() != x.storage());
  CHECK(contiguous(x).is_same(x));
  CHECK(flatten(x).sizes() == Shape{12});
  CHECK(squeeze(unsqueeze(x, 1)).sizes() == Shape{3, 4});
}

TEST_CASE("values/shape: slice backward puts the gradient in place and zeros elsewhere") {
  Tensor x = zeros({2, 5}, kFloat64);
  x.requires_grad_();
  autograd::backward({slice(x, 1, 1, 5, 2)}, {from_vector<double>({1, 2, 3, 4}, {2, 2})});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 2, 0, 0, 3, 0, 4, 0});
  Tensor y = zeros({3}, kFloat64);
  y.requires_grad_();
  autograd::backward({expand(y, {2, 3})}, {from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3})});
  CHECK(y.grad().to_vector<double>() == std::vector<double>{5, 7, 9});
}

TEST_CASE("values/cat: pieces in order and stack adds a dim") {
  const Tensor a = from_vector<int64_t>({1, 2, 3, 4}, {2, 2}), b = from_vector<int64_t>({5, 6}, {2, 1});
  CHECK(cat({a, b}, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 5, 3, 4, 6});
  CHECK(cat({a, a}, 0).sizes() == Shape{4, 2});
  CHECK(cat({a, zeros({0, 2}, kInt64)}, 0).to_vector<int64_t>() == a.to_vector<int64_t>());
  const Tensor s = stack({a, a}, 1);
  CHECK(s.sizes() == Shape{2, 2, 2});
  CHECK(s.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(stack({scalar_tensor(1), scalar_tensor(2)}).sizes() == Shape{2});
}

TEST_CASE("values/to: conversions and a non-floating target that is not recorded") {
  Tensor x = from_vector<double>({1.5, -2.5}, {2});
  x.requires_grad_();
  const Tensor i = to(x, kInt64);
  CHECK(i.dtype() == kInt64);
  CHECK_FALSE(i.requires_grad());
  CHECK(to(x, kFloat64).is_same(x));
  CHECK(to(x, Device::cpu()).is_same(x));
  const Tensor f = to(x, kFloat32);
  CHECK(f.requires_grad());
  autograd::backward({f}, {ones({2})});
  CHECK(x.grad().dtype() == kFloat64);
}

// ---- errors ---------------------------------------------------------------------------------------------

TEST_CASE("errors/cat: mismatched shapes dtypes devices and empty lists") {
  CHECK_THROWS_CONTAINING(cat({zeros({2, 3}), zeros({3, 3})}, 1), "sizes must match except in dim 1");
  CHECK_THROWS_CONTAINING(cat({zeros({2, 3}), zeros({2, 3, 1})}, 0), "at position 1");
  CHECK_THROWS_CONTAINING(cat({zeros({2, 3}), zeros({2, 3}, kFloat64)}, 0), "dtype");
  CHECK_THROWS_CONTAINING(cat({}, 0), "non-empty");
  CHECK_THROWS_CONTAINING(cat({zeros({2})}, 1), "out of range");
  CHECK_THROWS_CONTAINING(cat({zeros({}), zeros({})}, 0), "zero-dimensional");
  CHECK_THROWS_CONTAINING(stack({zeros({2, 3}), zeros({3, 2})}, 0), "expected every tensor to have shape");
  if (test::cuda_available())
    CHECK_THROWS_CONTAINING(cat({zeros({2}), zeros({2}, Device::cuda())}, 0), "at position 1");
}

TEST_CASE("errors/shape: invalid views name the op") {
  Tensor x = zeros({2, 3}, kFloat64);
  x.requires_grad_();
  CHECK_THROWS_CONTAINING(view(transpose(x, 0, 1), {6}), "use reshape()");
  CHECK_THROWS_CONTAINING(narrow(x, 1, 2, 2), "out of bounds");
  CHECK_THROWS_CONTAINING(select(x, 0, 2), "out of range");
  CHECK_THROWS_CONTAINING(expand(x, {4, 3}), "cannot expand");
  CHECK_THROWS_CONTAINING(permute(x, {0, 0}), "repeats");
  CHECK_THROWS_CONTAINING(reshape(x, {4}), "invalid for 6 elements");
  CHECK_THROWS_CONTAINING(view(Tensor(), {1}), "view: input is an undefined tensor");
}

// ---- cuda -----------------------------------------------------------------------------------------------

MINIDET_CUDA_TEST_CASE("cuda/shape: views cat and stack on the GPU match the CPU") {
  Generator g(20);
  const Tensor base = randn({2, 3, 4}, kFloat32, &g), other = randn({2, 3, 4}, kFloat32, &g);
  auto fn = [](const Tensor& x, const Tensor& y) {
    return cat({flatten(permute(x, {2, 0, 1}), 1), reshape(slice(y, 2, 0, 4, 2), {4, -1}),
                reshape(stack({select(x, 1, 2), squeeze(narrow(y, 1, 0, 1), 1)}, 0), {4, 4})}, 1);
  };
  Tensor xc = base.clone(), yc = other.clone(), xg = base.cuda(), yg = other.cuda();
  for (Tensor* t : {&xc, &yc, &xg, &yg}) t->requires_grad_();
  const Tensor out_c = fn(xc, yc), out_g = fn(xg, yg);
  REQUIRE(out_g.is_cuda());
  CHECK(test::max_abs_diff(out_g, out_c) == 0.0);  // pure data movement: bit-identical
  const Tensor up = randn(out_c.sizes(), kFloat32, &g);
  autograd::backward({out_c}, {up});
  autograd::backward({out_g}, {up.cuda()});
  CHECK(test::max_abs_diff(xg.grad(), xc.grad()) == 0.0);
  CHECK(test::max_abs_diff(yg.grad(), yc.grad()) == 0.0);
  // Device round trip and empty tensors.
  Tensor z = zeros({0, 3});
  z.requires_grad_();
  const Tensor zg = to(z, Device::cuda());
  CHECK(zg.is_cuda());
  autograd::backward({cat({zg, zg}, 0)}, {zeros({0, 3}, Device::cuda())});
  CHECK(z.grad().device().is_cpu());
  CHECK(z.grad().sizes() == Shape{0, 3});
}

// cat on a GPU copies its contiguous pieces in one launch per 64 (ops/shape/cat_kernels.h) and the others one
// by one: 150 pieces cross two launch boundaries; some are empty, some non-contiguous, of every dtype.
MINIDET_CUDA_TEST_CASE(
    "cuda/cat: 150 pieces, empty and non-contiguous ones among them, match the CPU bit for bit, every dtype and dim") {
  Generator g(31);
  const Shape base = {3, 2, 4};
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBool, kUInt8}) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      std::vector<Tensor> pieces_cpu, pieces_gpu;
      for (int i = 0; i < 150; ++i) {
        Shape shape = base;
        shape[dim] = i % 5 == 0 ? 0 : 1 + i % 3;
        Tensor values = mul(randn({shape[2], shape[1], shape[0]}, kFloat64, &g), 10.0).permute({2, 1, 0});
        if (dtype == kBool) values = gt(values, 0.0);
        if (dtype == kUInt8) values = abs(values);  // a negative double has no uint8 value
        const Tensor piece = i % 7 == 3 ? values.to(dtype) : values.to(dtype).contiguous();
        pieces_cpu.push_back(piece);
        pieces_gpu.push_back(i % 7 == 3 ? piece.contiguous().cuda().permute({2, 1, 0}).contiguous().permute({2, 1, 0})
                                        : piece.cuda());
      }
      CAPTURE(dtype);
      CAPTURE(dim);
      const Tensor expected = cat(pieces_cpu, dim), got = cat(pieces_gpu, dim);
      REQUIRE(got.is_cuda());
      REQUIRE(got.sizes() == expected.sizes());
      CHECK(test::max_abs_diff(got.to(kFloat64), expected.to(kFloat64)) == 0.0);
    }
  }
}
