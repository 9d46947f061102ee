// softmax and log_softmax: stability, gradients, and CUDA against the CPU.
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/softmax/softmax.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {

using Fn = std::function<Tensor(const Tensor&, int64_t)>;

const std::vector<std::pair<const char*, Fn>>& softmax_ops() {
  static const std::vector<std::pair<const char*, Fn>> ops = {
      {"softmax", [](const Tensor& x, int64_t dim) { return softmax(x, dim); }},
      {"log_softmax", [](const Tensor& x, int64_t dim) { return log_softmax(x, dim); }},
  };
  return ops;
}

}  // namespace

TEST_CASE("gradcheck/softmax: softmax and log_softmax along every dim of a non-contiguous input") {
  Generator g(21);
  const Tensor base = randn({5, 4, 3}, kFloat64, &g);
  Tensor x;
  {
    NoGradGuard raw;
    x = base.permute({2, 1, 0});  // (3, 4, 5), no unit stride in the last dim
  }
  x.requires_grad_();
  double worst = 0;
  for (const auto& [name, fn] : softmax_ops()) {
    for (int64_t dim : {0, 1, 2, -1}) {
      CAPTURE(name);
      CAPTURE(dim);
      auto op = fn;
      const auto result = autograd::gradcheck([op, dim](const TensorList& in) { return op(in[0], dim); }, {x});
      CHECK_MESSAGE(result.ok, result.report);
      worst = std::max(worst, result.max_abs_error);
    }
  }
  MESSAGE("softmax/log_softmax: largest gradcheck max_abs_error " << worst);
}

TEST_CASE("values/softmax: known rows and huge logits stay finite") {
  const Tensor x = from_vector<double>({0, std::log(3.0), 1000, 1000}, {2, 2});
  const std::vector<double> y = softmax(x, 1).to_vector<double>();
  CHECK(y[0] == doctest::Approx(0.25));
  CHECK(y[1] == doctest::Approx(0.75));
  CHECK(y[2] == doctest::Approx(0.5));  // exp(1000) would overflow without the max shift
  CHECK(y[3] == doctest::Approx(0.5));
  const std::vector<double> l = log_softmax(x, 1).to_vector<double>();
  CHECK(l[0] == doctest::Approx(std::log(0.25)));
  CHECK(l[3] == doctest::Approx(std::log(0.5)));
  // Columns of a (2, 2): softmax along dim 0.
  const std::vector<double> c = softmax(from_vector<double>({1, 2, 1, 5}, {2, 2}), 0).to_vector<double>();
  CHECK(c[0] == doctest::Approx(0.5));
  CHECK(c[1] == doctest::Approx(1 / (1 + std::exp(3.0))));
  CHECK(softmax(scalar_tensor(3.0, kFloat64), 0).item() == 1.0);
  CHECK(softmax(zeros({0, 4}), 1).sizes() == Shape{0, 4});
  CHECK(log_softmax(zeros({3, 0}), 1).sizes() == Shape{3, 0});
}

TEST_CASE("values/softmax: the backward formulas on one row") {
  // y = (0.25, 0.75); dy = (1, 0): dx = y * (dy - <dy, y>) = (0.25 * 0.75, -0.75 * 0.25).
  Tensor x = from_vector<double>({0, std::log(3.0)}).requires_grad_();
  softmax(x, 0).backward(from_vector<double>({1, 0}));
  CHECK(x.grad().to_vector<double>()[0] == doctest::Approx(0.1875));
  CHECK(x.grad().to_vector<double>()[1] == doctest::Approx(-0.1875));
  // log_softmax: dx = dy - softmax * sum(dy) = (1, 0) - (0.25, 0.75).
  Tensor z = from_vector<double>({0, std::log(3.0)}).requires_grad_();
  log_softmax(z, 0).backward(from_vector<double>({1, 0}));
  CHECK(z.grad().to_vector<double>()[0] == doctest::Approx(0.75));
  CHECK(z.grad().to_vector<double>()[1] == doctest::Approx(-0.75));
}

TEST_CASE("errors/softmax: bad dim and integer input") {
  CHECK_THROWS_CONTAINING(softmax(randn({2, 3}), 2), "softmax: dim 2 is out of range");
  CHECK_THROWS_CONTAINING(log_softmax(randn({2, 3}), -3), "log_softmax: dim -3 is out of range");
  CHECK_THROWS_CONTAINING(softmax(arange(4), 0), "softmax: expected input to be float32 or float64, got int64");
}

MINIDET_CUDA_TEST_CASE("cuda/softmax: forward and backward match the CPU including long rows and empty tensors") {
  struct Case {
    Shape shape;
    int64_t dim;
  };
  // (3, 2500): rows longer than 1024 along the last dim; (2500, 3) dim 0: strided rows; (0, 7): empty.
  const std::vector<Case> cases = {{{3, 2500}, 1}, {{2500, 3}, 0}, {{4, 5, 6}, 1}, {{64, 21}, -1}, {{0, 7}, 1}};
  for (const auto& [name, fn] : softmax_ops()) {
    for (const Case& c : cases) {
      CAPTURE(name);
      CAPTURE(c.dim);
      Tensor x_cpu = (randn(c.shape) * 3.0).requires_grad_();
      Tensor x_gpu = x_cpu.detach().cuda().requires_grad_();
      const Tensor up = randn(c.shape);
      Tensor y_cpu = fn(x_cpu, c.dim), y_gpu = fn(x_gpu, c.dim);
      y_cpu.backward(up);
      y_gpu.backward(up.cuda());
      CHECK(test::allclose(y_gpu, y_cpu, 1e-5, 1e-6));
      REQUIRE(x_gpu.grad().defined() == x_cpu.grad().defined());
      if (x_cpu.grad().defined()) CHECK(test::allclose(x_gpu.grad(), x_cpu.grad(), 1e-4, 1e-5));
    }
  }
}
