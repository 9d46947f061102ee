// Losses: cross_entropy, binary_cross_entropy_with_logits, smooth_l1_loss, l1_loss.
#include <cmath>
#include <functional>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/loss/cross_entropy.h"
#include "ops/loss/pointwise_loss.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;

namespace {

const std::vector<Reduction> kReductions = {Reduction::None, Reduction::Mean, Reduction::Sum};

// A float64 (rows, cols) leaf stored transposed.
Tensor transposed_leaf(int64_t rows, int64_t cols, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  const Tensor base = randn({cols, rows}, kFloat64, &g) * scale;
  Tensor x;
  {
    NoGradGuard raw;
    x = base.t();
  }
  return x.requires_grad_();
}

// Differences input - target of size >= 0.2 from every kink (0 and +-beta for beta in {0.5, 1}).
Tensor offsets_away_from_kinks(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  const std::vector<double> levels = {-2.0, -0.75, -0.3, 0.3, 0.75, 2.0};
  const Tensor pick = randint(0, static_cast<int64_t>(levels.size()), shape, kInt64, &g);
  std::vector<double> values;
  for (int64_t i : pick.to_vector<int64_t>()) values.push_back(levels[i]);
  return from_vector<double>(values, shape) + (rand(shape, kFloat64, &g) - 0.5) * 0.1;
}


double lse(const std::vector<double>& z) {
  double s = 0;
  for (double v : z) s += std::exp(v);
  return std::log(s);
}

}  // namespace

// ---- gradcheck ------------------------------------------------------------------------------------------------

TEST_CASE("gradcheck/cross_entropy: reductions weights ignore_index and label smoothing") {
  const Tensor logits = transposed_leaf(6, 5, 31, 2.0);
  const Tensor target = from_vector<int64_t>({0, 4, -100, 2, 2, 1});
  const Tensor weight = from_vector<double>({0.5, 1.0, 2.0, 1.5, 0.7});
  double worst = 0;
  for (Reduction reduction : kReductions) {
    for (bool weighted : {false, true}) {
      for (double smoothing : {0.0, 0.2}) {
        const std::string reduction_label = reduction_name(reduction);
        CAPTURE(reduction_label);
        CAPTURE(weighted);
        CAPTURE(smoothing);
        CrossEntropyOptions options;
        options.reduction = reduction;
        options.label_smoothing = smoothing;
        if (weighted) options.weight = weight;
        const auto result = autograd::gradcheck(
            [options](const TensorList& in) { return cross_entropy(in[0], in[1], options); }, {logits, target});
        CHECK_MESSAGE(result.ok, result.report);
        worst = std::max(worst, result.max_abs_error);
      }
    }
  }
  MESSAGE("cross_entropy: largest gradcheck max_abs_error " << worst);
}

TEST_CASE("gradcheck/binary_cross_entropy_with_logits: logits and targets with weight and pos_weight") {
  const Tensor logits = transposed_leaf(4, 3, 41, 2.0);
  Generator g(42);
  const Tensor targets = rand({4, 3}, kFloat64, &g).requires_grad_();
  const Tensor weight = from_vector<double>({0.5, 2.0, 1.0});
  const Tensor pos_weight = from_vector<double>({3.0, 0.5, 1.0});
  double worst = 0;
  for (Reduction reduction : kReductions) {
    for (int variant = 0; variant < 3; ++variant) {  // none, weight, weight + pos_weight
      const std::string reduction_label = reduction_name(reduction);
        CAPTURE(reduction_label);
      CAPTURE(variant);
      BceWithLogitsOptions options;
      options.reduction = reduction;
      if (variant >= 1) options.weight = weight;
      if (variant >= 2) options.pos_weight = pos_weight;
      const auto result = autograd::gradcheck(
          [options](const TensorList& in) { return binary_cross_entropy_with_logits(in[0], in[1], options); },
          {logits, targets});
      CHECK_MESSAGE(result.ok, result.report);
      worst = std::max(worst, result.max_abs_error);
    }
  }
  MESSAGE("binary_cross_entropy_with_logits: largest gradcheck max_abs_error " << worst);
}

TEST_CASE("gradcheck/smooth_l1_loss: both pieces and beta 0 on input and target") {
  const Tensor input = transposed_leaf(5, 4, 51);
  Tensor target;
  {
    NoGradGuard raw;
    target = (input - offsets_away_from_kinks({5, 4}, 52)).detach();
  }
  target.requires_grad_();
  double worst = 0;
  for (double beta : {1.0, 0.5, 0.0}) {
    for (Reduction reduction : kReductions) {
      CAPTURE(beta);
      const std::string reduction_label = reduction_name(reduction);
        CAPTURE(reduction_label);
      const auto result = autograd::gradcheck(
          [=](const TensorList& in) { return smooth_l1_loss(in[0], in[1], beta, reduction); }, {input, target});
      CHECK_MESSAGE(result.ok, result.report);
      worst = std::max(worst, result.max_abs_error);
    }
  }
  MESSAGE("smooth_l1_loss: largest gradcheck max_abs_error " << worst);
}

TEST_CASE("gradcheck/l1_loss: input and target away from zero differences") {
  const Tensor input = transposed_leaf(5, 4, 61);
  Tensor target;
  {
    NoGradGuard raw;
    target = (input - offsets_away_from_kinks({5, 4}, 62)).detach();
  }
  target.requires_grad_();
  double worst = 0;
  for (Reduction reduction : kReductions) {
    const std::string reduction_label = reduction_name(reduction);
        CAPTURE(reduction_label);
    const auto result =
        autograd::gradcheck([=](const TensorList& in) { return l1_loss(in[0], in[1], reduction); }, {input, target});
    CHECK_MESSAGE(result.ok, result.report);
    worst = std::max(worst, result.max_abs_error);
  }
  MESSAGE("l1_loss: largest gradcheck max_abs_error " << worst);
}

// ---- values ---------------------------------------------------------------------------------------------------

TEST_CASE("values/cross_entropy: by hand with weights ignore_index smoothing and every reduction") {
  const Tensor logits = from_vector<double>({1, 2, 3, 1, 0, -1}, {2, 3});
  const double l0 = lse({1, 2, 3}) - 3, l1 = lse({1, 0, -1}) - 1;  // -log p of targets 2 and 0
  const Tensor target = from_vector<int64_t>({2, 0});
  CHECK(cross_entropy(logits, target).item() == doctest::Approx((l0 + l1) / 2));
  CHECK(l0 == doctest::Approx(0.4076059644));  // log(1 + e^-1 + e^-2)

  CrossEntropyOptions o;
  o.reduction = Reduction::None;
  CHECK(test::allclose(cross_entropy(logits, target, o), from_vector<double>({l0, l1}), 1e-12, 1e-12));
  o.reduction = Reduction::Sum;
  CHECK(cross_entropy(logits, target, o).item() == doctest::Approx(l0 + l1));

  // Weighted mean divides by the weights of the targets: (3 l0 + 1 l1) / (3 + 1), not by N.
  o = {};
  o.weight = from_vector<double>({1, 2, 3});
  CHECK(cross_entropy(logits, target, o).item() == doctest::Approx((3 * l0 + 1 * l1) / 4));

  // An ignored sample counts neither in the sum nor in the divisor.
  o = {};
  CHECK(cross_entropy(logits, from_vector<int64_t>({2, -100}), o).item() == doctest::Approx(l0));
  o.ignore_index = 0;
  CHECK(cross_entropy(logits, target, o).item() == doctest::Approx(l0));
  o.ignore_index = -100;
  CHECK(std::isnan(cross_entropy(logits, from_vector<int64_t>({-100, -100}), o).item()));

  // Label smoothing 0.1: 0.9 (-log p_t) + 0.1 / 3 * sum_c (-log p_c).
  o = {};
  o.label_smoothing = 0.1;
  const double s0 = 3 * lse({1, 2, 3}) - 6, s1 = 3 * lse({1, 0, -1}) - 0;
  const double expected = ((0.9 * l0 + 0.1 / 3 * s0) + (0.9 * l1 + 0.1 / 3 * s1)) / 2;
  CHECK(cross_entropy(logits, target, o).item() == doctest::Approx(expected));

  // Gradient of the mean: (softmax - onehot) / N for each row.
  Tensor z = from_vector<double>({0, std::log(3.0)}, {1, 2}).requires_grad_();
  cross_entropy(z, from_vector<int64_t>({1})).backward();
  CHECK(z.grad().to_vector<double>()[0] == doctest::Approx(0.25));
  CHECK(z.grad().to_vector<double>()[1] == doctest::Approx(-0.25));

  // Empty batch: none is empty, sum 0, mean NaN.
  const Tensor empty_logits = zeros({0, 3}, kFloat64);
  const Tensor empty_target = zeros({0}, kInt64);
  o = {};
  CHECK(std::isnan(cross_entropy(empty_logits, empty_target, o).item()));
  o.reduction = Reduction::Sum;
  CHECK(cross_entropy(empty_logits, empty_target, o).item() == 0.0);
  o.reduction = Reduction::None;
  CHECK(cross_entropy(empty_logits, empty_target, o).sizes() == Shape{0});
}

TEST_CASE("values/binary_cross_entropy_with_logits: by hand and stable at large logits") {
  BceWithLogitsOptions o;
  o.reduction = Reduction::None;
  const Tensor x = from_vector<double>({0, 2, 100, -100});
  const Tensor t = from_vector<double>({1, 0, 0, 1});
  const std::vector<double> l = binary_cross_entropy_with_logits(x, t, o).to_vector<double>();
  CHECK(l[0] == doctest::Approx(std::log(2.0)));
  CHECK(l[1] == doctest::Approx(std::log(1 + std::exp(2.0))));
  CHECK(l[2] == doctest::Approx(100.0));  // log(1 + e^100) without overflowing
  CHECK(l[3] == doctest::Approx(100.0));
  o.pos_weight = from_vector<double>({3.0});  // the positive term (t = 1) weighs 3 times
  const std::vector<double> p = binary_cross_entropy_with_logits(x, t, o).to_vector<double>();
  CHECK(p[0] == doctest::Approx(3 * std::log(2.0)));
  CHECK(p[1] == doctest::Approx(l[1]));
  o = {};
  o.weight = from_vector<double>({2.0, 0.0, 0.0, 0.0});
  CHECK(binary_cross_entropy_with_logits(x, t, o).item() == doctest::Approx(2 * std::log(2.0) / 4));
  // Gradient: sigmoid(x) - t, averaged.
  Tensor z = from_vector<double>({0.0, 0.0}).requires_grad_();
  binary_cross_entropy_with_logits(z, from_vector<double>({1.0, 0.25})).backward();
  CHECK(z.grad().to_vector<double>()[0] == doctest::Approx(-0.25));
  CHECK(z.grad().to_vector<double>()[1] == doctest::Approx(0.125));
  CHECK(std::isnan(binary_cross_entropy_with_logits(zeros({0}), zeros({0})).item()));
}

TEST_CASE("values/smooth_l1_loss: both pieces and beta 0 equals l1") {
  const Tensor input = from_vector<double>({0.5, 2.0, -3.0, 1.0});
  const Tensor target = from_vector<double>({0.0, 0.0, 0.0, 1.0});
  CHECK(smooth_l1_loss(input, target, 1.0, Reduction::None).to_vector<double>() ==
        std::vector<double>{0.125, 1.5, 2.5, 0.0});
  CHECK(smooth_l1_loss(input, target, 1.0, Reduction::Sum).item() == doctest::Approx(4.125));
  CHECK(smooth_l1_loss(input, target, 0.0, Reduction::None).to_vector<double>() ==
        std::vector<double>{0.5, 2.0, 3.0, 0.0});
  CHECK(l1_loss(input, target).item() == doctest::Approx(5.5 / 4));
  Tensor x = from_vector<double>({0.5, 2.0, -3.0, 1.0}).requires_grad_();
  smooth_l1_loss(x, target, 1.0, Reduction::Sum).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0.5, 1.0, -1.0, 0.0});
  Tensor y = from_vector<double>({0.5, 2.0, -3.0, 1.0}).requires_grad_();
  l1_loss(y, target, Reduction::Sum).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{1.0, 1.0, -1.0, 0.0});
}

// ---- errors ---------------------------------------------------------------------------------------------------

TEST_CASE("errors/cross_entropy: shapes dtypes out-of-range targets weights and smoothing") {
  const Tensor logits = randn({3, 4});
  const Tensor target = from_vector<int64_t>({0, 1, 3});
  CHECK_THROWS_CONTAINING(cross_entropy(randn({4}), target), "cross_entropy: expected logits of shape (N, C)");
  CHECK_THROWS_CONTAINING(cross_entropy(logits, target.to(kFloat32)), "expected target of dtype int64");
  CHECK_THROWS_CONTAINING(cross_entropy(logits, from_vector<int64_t>({0, 1})), "expected target of shape (3,)");
  CHECK_THROWS_CONTAINING(cross_entropy(logits, from_vector<int64_t>({0, 4, 1})),
                          "cross_entropy: target 4 at index 1 is out of range");
  CHECK_THROWS_CONTAINING(cross_entropy(logits, from_vector<int64_t>({0, 1, -1})), "target -1 at index 2");
  CHECK_THROWS_CONTAINING(cross_entropy(from_vector<int64_t>({1, 2}, {1, 2}), from_vector<int64_t>({0})),
                          "expected logits to be float32 or float64");
  CrossEntropyOptions o;
  o.weight = ones({3});
  CHECK_THROWS_CONTAINING(cross_entropy(logits, target, o), "expected weight of shape (4,)");
  o.weight = ones({4}, kFloat64);
  CHECK_THROWS_CONTAINING(cross_entropy(logits, target, o), "same dtype");
  o = {};
  o.label_smoothing = 1.5;
  CHECK_THROWS_CONTAINING(cross_entropy(logits, target, o), "label_smoothing in [0, 1]");
}

TEST_CASE("errors/pointwise_loss: shapes dtypes weights and beta") {
  const Tensor x = randn({2, 3});
  CHECK_THROWS_CONTAINING(binary_cross_entropy_with_logits(x, randn({3, 2})), "same shape");
  CHECK_THROWS_CONTAINING(binary_cross_entropy_with_logits(x, randn({2, 3}, kFloat64)), "same dtype");
  BceWithLogitsOptions o;
  o.pos_weight = ones({2});
  CHECK_THROWS_CONTAINING(binary_cross_entropy_with_logits(x, x, o), "pos_weight of shape (2,) does not broadcast");
  CHECK_THROWS_CONTAINING(smooth_l1_loss(x, x, -1.0), "smooth_l1_loss: expected beta >= 0");
  CHECK_THROWS_CONTAINING(l1_loss(x, randn({3})), "l1_loss: expected input and target of the same shape");
  CHECK_THROWS_CONTAINING(l1_loss(arange(3), arange(3)), "l1_loss: expected input to be float32 or float64");
}

// ---- cuda -----------------------------------------------------------------------------------------------------

MINIDET_CUDA_TEST_CASE("cuda/cross_entropy: forward and backward match the CPU including many classes") {
  struct Case {
    int64_t samples, classes;
  };
  for (const Case c : {Case{300, 1500}, Case{64, 21}, Case{5, 2}, Case{0, 7}}) {
    for (Reduction reduction : kReductions) {
      for (int variant = 0; variant < 3; ++variant) {  // plain, weight + ignore, weight + smoothing
        CAPTURE(c.classes);
        const std::string reduction_label = reduction_name(reduction);
        CAPTURE(reduction_label);
        CAPTURE(variant);
        Tensor target = randint(0, c.classes, {c.samples});
        CrossEntropyOptions o;
        o.reduction = reduction;
        if (variant >= 1) o.weight = rand({c.classes}) + 0.5;
        if (variant == 1 && c.samples > 0) target.select(0, 0).fill_(-100);
        if (variant == 2) o.label_smoothing = 0.1;
        Tensor x_cpu = (randn({c.samples, c.classes}) * 3.0).requires_grad_();
        Tensor x_gpu = x_cpu.detach().cuda().requires_grad_();
        CrossEntropyOptions o_gpu = o;
        if (o.weight.defined()) o_gpu.weight = o.weight.cuda();
        Tensor y_cpu = cross_entropy(x_cpu, target, o), y_gpu = cross_entropy(x_gpu, target.cuda(), o_gpu);
        CHECK(test::allclose(y_gpu, y_cpu, 1e-4, 1e-5));
        const Tensor up = randn(y_cpu.sizes());
        y_cpu.backward(up);
        y_gpu.backward(up.cuda());
        REQUIRE(x_gpu.grad().defined() == x_cpu.grad().defined());
        if (x_cpu.grad().defined()) CHECK(test::allclose(x_gpu.grad(), x_cpu.grad(), 1e-4, 1e-6));
      }
    }
  }
  CHECK_THROWS_CONTAINING(cross_entropy(randn({2, 3}).cuda(), from_vector<int64_t>({0, 3}).cuda()),
                          "target 3 at index 1 is out of range");
}

MINIDET_CUDA_TEST_CASE("cuda/pointwise_loss: bce smooth_l1 and l1 match the CPU including empty tensors") {
  for (const Shape& shape : {Shape{37, 29}, Shape{2, 1500}, Shape{0, 3}}) {
    for (Reduction reduction : kReductions) {
      const std::string reduction_label = reduction_name(reduction);
        CAPTURE(reduction_label);
      const Tensor x_host = randn(shape) * 3.0, t_host = rand(shape);
      const Tensor w = rand({shape[1]}) + 0.5, pw = rand({shape[1]}) * 2.0;
      using LossFn = std::function<Tensor(const Tensor&, const Tensor&, bool)>;
      const std::vector<LossFn> losses = {
          [=](const Tensor& a, const Tensor& b, bool gpu) {
            BceWithLogitsOptions o;
            o.reduction = reduction;
            o.weight = gpu ? w.cuda() : w;
            o.pos_weight = gpu ? pw.cuda() : pw;
            return binary_cross_entropy_with_logits(a, b, o);
          },
          [=](const Tensor& a, const Tensor& b, bool) { return smooth_l1_loss(a, b, 0.5, reduction); },
          [=](const Tensor& a, const Tensor& b, bool) { return smooth_l1_loss(a, b, 0.0, reduction); },
          [=](const Tensor& a, const Tensor& b, bool) { return l1_loss(a, b, reduction); },
      };
      for (size_t k = 0; k < losses.size(); ++k) {
        CAPTURE(k);
        Tensor x_cpu = x_host.detach().clone().requires_grad_(), t_cpu = t_host.detach().clone().requires_grad_();
        Tensor x_gpu = x_host.cuda().requires_grad_(), t_gpu = t_host.cuda().requires_grad_();
        Tensor y_cpu = losses[k](x_cpu, t_cpu, false), y_gpu = losses[k](x_gpu, t_gpu, true);
        CHECK(test::allclose(y_gpu, y_cpu, 1e-4, 1e-5));
        const Tensor up = randn(y_cpu.sizes());
        y_cpu.backward(up);
        y_gpu.backward(up.cuda());
        REQUIRE(x_gpu.grad().defined() == x_cpu.grad().defined());
        if (!x_cpu.grad().defined()) continue;
        CHECK(test::allclose(x_gpu.grad(), x_cpu.grad(), 1e-5, 1e-6));
        CHECK(test::allclose(t_gpu.grad(), t_cpu.grad(), 1e-5, 1e-6));
      }
    }
  }
}
