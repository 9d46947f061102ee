// gradcheck itself: it must pass correct backwards and catch wrong ones.
#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/reduction/reduction.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {
// x^3 with a deliberately wrong backward (2x^2 instead of 3x^2), to prove gradcheck notices.
Tensor cube_wrong(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard raw;
    y = x * x * x;
  }
  autograd::record("cube_wrong", {x}, {y}, {x}, [](autograd::BackwardContext& ctx, const TensorList& g) -> TensorList {
    const Tensor x = ctx.saved(0);
    return {g[0] * x * x * 2.0};
  });
  return y;
}

// A backward that forgets to write: returns zeros.
Tensor forgetful(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard raw;
    y = x * 2.0;
  }
  autograd::record("forgetful", {x}, {y}, {}, [](autograd::BackwardContext&, const TensorList& g) -> TensorList {
    return {g[0] * 0.0};
  });
  return y;
}
}  // namespace

TEST_CASE("values/gradcheck: passes a correct backward in every mode") {
  Tensor x = (randn({3, 4}, kFloat64) + 0.1).detach().requires_grad_();
  auto fn = [](const TensorList& in) { return tanh(in[0]) * in[0]; };
  autograd::GradcheckOptions full;
  auto r1 = autograd::gradcheck(fn, {x}, full);
  CHECK_MESSAGE(r1.ok, r1.report);
  CHECK(r1.report.find("full Jacobian") != std::string::npos);
  autograd::GradcheckOptions projected;
  projected.full_jacobian_limit = 0;
  auto r2 = autograd::gradcheck(fn, {x}, projected);
  CHECK_MESSAGE(r2.ok, r2.report);
  CHECK(r2.report.find("projection") != std::string::npos);
  autograd::GradcheckOptions directional;
  directional.full_jacobian_limit = 0;
  directional.per_element_limit = 0;
  auto r3 = autograd::gradcheck(fn, {x}, directional);
  CHECK_MESSAGE(r3.ok, r3.report);
  CHECK(r3.report.find("directional") != std::string::npos);
}

TEST_CASE("values/gradcheck: catches a wrong backward and names the worst entry") {
  Tensor x = (rand({5}, kFloat64) + 0.5).detach().requires_grad_();
  auto r = autograd::gradcheck([](const TensorList& in) { return cube_wrong(in[0]); }, {x});
  CHECK_FALSE(r.ok);
  CHECK(r.report.find("analytic") != std::string::npos);
  CHECK(r.report.find("numeric") != std::string::npos);
  autograd::GradcheckOptions directional;
  directional.full_jacobian_limit = 0;
  directional.per_element_limit = 0;
  CHECK_FALSE(autograd::gradcheck([](const TensorList& in) { return cube_wrong(in[0]); }, {x}, directional).ok);
}

TEST_CASE("values/gradcheck: catches an all-zero analytic gradient") {
  Tensor x = randn({4}, kFloat64).requires_grad_();
  auto r = autograd::gradcheck([](const TensorList& in) { return forgetful(in[0]); }, {x});
  CHECK_FALSE(r.ok);
}

TEST_CASE("values/gradcheck: accepts non-contiguous inputs and constant inputs") {
  Tensor base = randn({4, 3}, kFloat64);
  Tensor xt;
  {
    NoGradGuard raw;
    xt = base.t();  // (3, 4) with strides (1, 3)
  }
  xt.requires_grad_();
  Tensor c = randn({3, 4}, kFloat64);  // no grad: a constant
  auto r = autograd::gradcheck([](const TensorList& in) { return sigmoid(in[0]) * in[1]; }, {xt, c});
  CHECK_MESSAGE(r.ok, r.report);
}

TEST_CASE("errors/gradcheck: rejects float32 inputs and inputs with no grad") {
  Tensor f = randn({2}).requires_grad_();
  CHECK_THROWS_CONTAINING(autograd::gradcheck([](const TensorList& in) { return in[0]; }, {f}), "float64");
  Tensor d = randn({2}, kFloat64);
  CHECK_THROWS_CONTAINING(autograd::gradcheck([](const TensorList& in) { return in[0]; }, {d}), "no input");
}

TEST_CASE("values/gradcheck: a 0-dim output (a scalar loss) is checked like any other") {
  Tensor x = randn({3}, kFloat64).requires_grad_();
  auto r = autograd::gradcheck([](const TensorList& in) { return sum(tanh(in[0]) * in[0]); }, {x});
  CHECK(r.entries_checked == 3);
  CHECK_MESSAGE(r.ok, r.report);
}
