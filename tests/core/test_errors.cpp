// The error family of core: MINIDET_CHECK itself, then each kind of misuse that core must refuse with a
// clear message instead of crashing or returning garbage.
#include <stdexcept>
#include <string>

#include "core/factories.h"
#include "tests/support.h"

using namespace minidet;

TEST_CASE("errors/check: MINIDET_CHECK composes the message and adds file and line") {
  int line = 0;
  try {
    line = __LINE__ + 1;
    MINIDET_CHECK(1 + 1 == 3, "roi_align: expected ", 5, " columns, got shape ", Shape{2, 3}, " and ", Shape{7});
    FAIL("MINIDET_CHECK did not throw");
  } catch (const Error& e) {
    // Shapes print like Python tuples, including the trailing comma of a 1-tuple.
    const std::string message = "roi_align: expected 5 columns, got shape (2, 3) and (7,)";
    CHECK(e.message() == message);  // message(): the composed parts only
    CHECK(std::string(e.what()) == message + " (at " + __FILE__ + ":" + std::to_string(line) + ")");
    CHECK(std::string(e.file()) == __FILE__);
    CHECK(e.line() == line);
  }
}

TEST_CASE("errors/check: a passing check never builds its message") {
  // The parts are streamed only on failure, so checks in hot loops cost one branch.
  int built = 0;
  auto expensive = [&] { return ++built; };
  MINIDET_CHECK(true, "never shown ", expensive());
  CHECK(built == 0);
}

TEST_CASE("errors/check: Error is a std::runtime_error and MINIDET_FAIL always throws") {
  // Code that only knows the standard library can still catch minidet errors.
  CHECK_THROWS_AS(MINIDET_FAIL("boom ", 1), std::runtime_error);
  CHECK_THROWS_CONTAINING(MINIDET_FAIL("boom ", 1), "boom 1 (at ");
}

TEST_CASE("errors/dtype: data<T> with the wrong type and unknown dtype names") {
  const Tensor t = zeros({2});
  CHECK(t.data<float>() != nullptr);
  CHECK_THROWS_CONTAINING(t.data<double>(), "Tensor::data<float64>: tensor has dtype float32");
  CHECK_THROWS_CONTAINING(parse_dtype("float"), "unknown dtype 'float'");
  // The dispatch macros name the op and the expected dtypes instead of running the wrong kernel.
  auto dispatch = [](DType d) { return MINIDET_DISPATCH_FLOATING(d, "my_op", [&] { return sizeof(scalar_t); }); };
  CHECK(dispatch(kFloat64) == 8);
  CHECK_THROWS_CONTAINING(dispatch(kInt64), "my_op: unsupported dtype int64 (expected float32 or float64)");
}

TEST_CASE("errors/device: Device::parse accepts cpu cuda cuda:N and rejects the rest") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3").index == 3);
  CHECK(Device::parse("cuda:3").str() == "cuda:3");
  CHECK_THROWS_CONTAINING(Device::parse("gpu"), "unknown device 'gpu'");
  CHECK_THROWS_CONTAINING(Device::parse("CPU"), "unknown device");  // case matters
  CHECK_THROWS_CONTAINING(Device::parse("cuda:"), "bad GPU ordinal in 'cuda:'");
  CHECK_THROWS_CONTAINING(Device::parse("cuda:x"), "bad GPU ordinal");
  CHECK_THROWS_CONTAINING(Device::parse("cuda:-1"), "bad GPU ordinal");
  CHECK_THROWS_CONTAINING(Device::parse("cuda:1 "), "bad GPU ordinal");
}

TEST_CASE("errors/tensor: item needs exactly one element") {
  CHECK_THROWS_CONTAINING(zeros({2, 2}).item(), "expected a tensor with one element, got shape (2, 2)");
  CHECK_THROWS_CONTAINING(zeros({0}).item(), "one element");
}

TEST_CASE("errors/tensor: metadata with bad dims") {
  const Tensor t = zeros({2, 3});
  CHECK_THROWS_CONTAINING(t.size(2), "dim 2 is out of range for a tensor with 2 dims (expected -2 to 1)");
  CHECK_THROWS_CONTAINING(t.stride(-3), "out of range");
  CHECK_THROWS_CONTAINING(scalar_tensor(1).size(0), "a 0-dim tensor has no dims");
}

TEST_CASE("errors/factories: invalid shapes counts and ranges") {
  CHECK_THROWS_CONTAINING(zeros({2, -1}), "negative size in (2, -1)");
  CHECK_THROWS_CONTAINING(from_vector<float>({1, 2, 3}, {2, 2}), "3 values do not fill shape (2, 2)");
  CHECK_THROWS_CONTAINING(arange(0, 5, 0), "nonzero step");
  CHECK_THROWS_CONTAINING(rand({2}, kInt64), "rand: expected a floating dtype, got int64");
  CHECK_THROWS_CONTAINING(randn({2}, kBool), "randn: expected a floating dtype");
  CHECK_THROWS_CONTAINING(randint(3, 3, {2}), "empty range [3, 3)");
  CHECK_THROWS_CONTAINING(randperm(-1), "n must be non-negative");
  Generator g;
  CHECK_THROWS_CONTAINING(g.set_state({1, 2, 3}), "expected 6 words, got 3");
}

TEST_CASE("errors/views: view shapes that do not match the element count") {
  const Tensor t = zeros({2, 3});
  CHECK_THROWS_CONTAINING(t.view({4, 2}), "shape (4, 2) is invalid for 6 elements");
  CHECK_THROWS_CONTAINING(t.view({-1, -1}), "only one size may be -1");
  CHECK_THROWS_CONTAINING(t.reshape({-1, 4}), "is invalid for 6 elements");
  CHECK_THROWS_CONTAINING(t.view({-2, -3}), "invalid size -2");
}

TEST_CASE("errors/copy: copy_ needs a broadcastable source") {
  Tensor dst = zeros({2, 3});
  CHECK_THROWS_CONTAINING(dst.copy_(zeros({2})), "cannot expand shape (2,) to (2, 3)");
  CHECK_THROWS_CONTAINING(dst.copy_(zeros({1, 2, 3})), "fewer dims");
}

TEST_CASE("errors/autograd: requires_grad_ only on floating tensors") {
  Tensor i = zeros({2}, kInt64);
  CHECK_THROWS_CONTAINING(i.requires_grad_(), "only float32/float64 tensors can require grad, this one is int64");
  CHECK_NOTHROW(i.requires_grad_(false));  // turning it off is always fine
  Tensor f = zeros({2}, kFloat64);
  f.requires_grad_();
  CHECK(f.requires_grad());
  CHECK(f.is_leaf());
}

TEST_CASE("errors/autograd: raw view methods refuse a tensor that requires grad while recording") {
  // A raw view would silently cut the graph; the message must send the reader to the differentiable op.
  Tensor w = zeros({2, 3});
  w.requires_grad_();
  REQUIRE(GradMode::is_enabled());
  CHECK_THROWS_CONTAINING(w.view({6}), "Tensor::view does not record gradients");
  CHECK_THROWS_CONTAINING(w.view({6}), "differentiable minidet::view from ops/");
  CHECK_THROWS_CONTAINING(w.t(), "Tensor::permute does not record gradients");
  CHECK_THROWS_CONTAINING(w.contiguous(), "Tensor::contiguous does not record gradients");
  CHECK_THROWS_CONTAINING(w.clone(), "NoGradGuard");
  CHECK_THROWS_CONTAINING(w.to(kFloat64), "Tensor::to does not record gradients");

  // Reading values is always allowed: it cannot cut a graph.
  CHECK(w.to_vector<float>() == std::vector<float>(6, 0.0f));
  {
    NoGradGuard no_grad;  // e.g. an optimizer step or evaluation
    CHECK_FALSE(GradMode::is_enabled());
    CHECK(w.view({6}).sizes() == Shape{6});
    CHECK(w.contiguous().is_same(w));
    {
      EnableGradGuard grad;  // re-enables recording for an inner scope
      CHECK(GradMode::is_enabled());
      CHECK_THROWS_CONTAINING(w.view({6}), "does not record gradients");
    }
    CHECK_FALSE(GradMode::is_enabled());  // the inner guard restored the outer state
  }
  CHECK(GradMode::is_enabled());  // and the outer guard restored recording
}

TEST_CASE("errors/autograd: in-place writes to a leaf that requires grad") {
  Tensor w = zeros({3});
  w.requires_grad_();
  CHECK_THROWS_CONTAINING(w.fill_(1), "Tensor::fill_: a leaf that requires grad cannot be modified in place");
  CHECK_THROWS_CONTAINING(w.copy_(ones({3})), "Tensor::copy_: a leaf that requires grad");
  CHECK(w.to_vector<float>() == std::vector<float>{0, 0, 0});  // the refused write left no trace
  {
    NoGradGuard no_grad;  // how optimizers update parameters
    w.fill_(1);
  }
  CHECK(w.to_vector<float>() == std::vector<float>{1, 1, 1});
}

TEST_CASE("errors/tensor: using an undefined tensor") {
  const Tensor u;
  CHECK_FALSE(u.defined());
  CHECK(u.str() == "tensor(undefined)");  // printing is safe, for debugging
  CHECK_FALSE(u.requires_grad());
  CHECK_THROWS_CONTAINING(u.numel(), "Tensor::numel: the tensor is undefined");
  CHECK_THROWS_CONTAINING(u.sizes(), "undefined");
  CHECK_THROWS_CONTAINING(u.item(), "Tensor::item: the tensor is undefined");
  Tensor t = zeros({2});
  CHECK_THROWS_CONTAINING(t.copy_(u), "the source tensor is undefined");
  Tensor v;
  CHECK_THROWS_CONTAINING(v.fill_(0), "Tensor::fill_: the tensor is undefined");
}

// Only meaningful without a GPU, so it is skipped (visibly) on a GPU machine; cuda/errors covers that side.
TEST_CASE("errors/device: allocating on CUDA without a GPU" * doctest::skip(minidet::test::cuda_available())) {
  CHECK_THROWS_AS(zeros({2}, Device::cuda()), Error);
  CHECK_THROWS_CONTAINING(zeros({2}, Device::cuda()), "cannot allocate on cuda:0");
  CHECK_THROWS_CONTAINING(from_vector<float>({1}).cuda(), "cuda:0");
}

MINIDET_CUDA_TEST_CASE("cuda/errors: allocating on a GPU ordinal that does not exist") {
  CHECK_THROWS_CONTAINING(zeros({2}, Device::cuda(cuda::device_count())), "GPU(s) visible");
}

TEST_CASE("errors/copy: a destination with an expanded dim is refused") {
  Tensor dst = zeros({1}).expand({100});
  CHECK_THROWS_CONTAINING(dst.copy_(arange(100, kFloat32)), "single memory location");
}

TEST_CASE("errors/tensor: shapes whose element or byte count overflows are refused") {
  CHECK_THROWS_CONTAINING(empty({int64_t(1) << 40, int64_t(1) << 40}), "int64");
  CHECK_THROWS_CONTAINING(empty({int64_t(1) << 31, int64_t(1) << 30}, kFloat64), "size_t");
}
