// Optimizers and schedules against values computed by hand.
#include <cmath>
#include <vector>

#include "autograd/engine.h"
#include "core/factories.h"
#include "nn/optim/adam.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/sgd.h"
#include "tests/support.h"

using minidet::nn::NamedTensors;

using namespace minidet;
using namespace minidet::nn;

namespace {
Tensor param(std::vector<double> v) {
  Tensor p = from_vector<double>(v);
  p.requires_grad_();
  return p;
}
void set_grad(const Tensor& p, std::vector<double> g) { p.set_grad(from_vector<double>(g)); }
SGDOptions momentum(double m, bool nesterov = false) {
  SGDOptions o;
  o.momentum = m;
  o.nesterov = nesterov;
  return o;
}
AdamOptions betas(double beta1, double beta2) {
  AdamOptions o;
  o.beta1 = beta1;
  o.beta2 = beta2;
  return o;
}
}  // namespace

TEST_CASE("values/sgd: plain step with weight decay") {
  Tensor p = param({1.0, -2.0});
  SGD sgd({{{p}, /*lr=*/0.1, /*weight_decay=*/0.5}});
  set_grad(p, {0.2, 0.4});
  sgd.step();
  // p - lr * (g + wd p) = 1 - 0.1*(0.2 + 0.5) = 0.93;  -2 - 0.1*(0.4 - 1.0) = -1.94
  CHECK(p.to_vector<double>()[0] == doctest::Approx(0.93));
  CHECK(p.to_vector<double>()[1] == doctest::Approx(-1.94));
}

TEST_CASE("values/sgd: momentum starts from the first gradient") {
  Tensor p = param({1.0});
  SGD sgd({{{p}, 0.1, 0.0}}, momentum(0.9));
  set_grad(p, {1.0});
  sgd.step();  // buf = 1, p = 1 - 0.1 = 0.9
  CHECK(p.item<double>() == doctest::Approx(0.9));
  set_grad(p, {0.5});
  sgd.step();  // buf = 0.9*1 + 0.5 = 1.4, p = 0.9 - 0.14 = 0.76
  CHECK(p.item<double>() == doctest::Approx(0.76));
}

TEST_CASE("values/sgd: nesterov looks ahead along the momentum") {
  Tensor p = param({1.0});
  SGD sgd({{{p}, 0.1, 0.0}}, momentum(0.9, /*nesterov=*/true));
  set_grad(p, {1.0});
  sgd.step();  // buf = 1, d = 1 + 0.9*1 = 1.9, p = 1 - 0.19 = 0.81
  CHECK(p.item<double>() == doctest::Approx(0.81));
  set_grad(p, {0.5});
  sgd.step();  // buf = 0.9 + 0.5 = 1.4, d = 0.5 + 1.26 = 1.76, p = 0.81 - 0.176 = 0.634
  CHECK(p.item<double>() == doctest::Approx(0.634));
}

TEST_CASE("values/sgd: parameters without a gradient are skipped") {
  Tensor a = param({1.0}), b = param({2.0});
  SGD sgd({{{a, b}, 0.1, 0.0}});
  set_grad(a, {1.0});
  sgd.step();
  CHECK(a.item<double>() == doctest::Approx(0.9));
  CHECK(b.item<double>() == 2.0);
}

TEST_CASE("values/adam: the first steps with bias correction") {
  Tensor p = param({1.0});
  Adam adam({{{p}, /*lr=*/0.1, 0.0}}, betas(0.9, 0.999));
  set_grad(p, {2.0});
  adam.step();
  // m = 0.2, v = 0.004; m_hat = 2, v_hat = 4; p = 1 - 0.1 * 2 / (2 + 1e-8) = 0.9 (the first step is lr*sign)
  CHECK(p.item<double>() == doctest::Approx(0.9).epsilon(1e-9));
  set_grad(p, {1.0});
  adam.step();
  // m = 0.18 + 0.1 = 0.28, v = 0.003996 + 0.001 = 0.004996
  const double m_hat = 0.28 / (1 - 0.81), v_hat = 0.004996 / (1 - 0.998001);
  CHECK(p.item<double>() == doctest::Approx(0.9 - 0.1 * m_hat / (std::sqrt(v_hat) + 1e-8)).epsilon(1e-9));
}

TEST_CASE("values/adam: coupled weight decay versus AdamW's decoupled decay") {
  Tensor a = param({2.0}), w = param({2.0});
  Adam adam({{{a}, 0.1, 0.5}});
  AdamW adamw({{{w}, 0.1, 0.5}});
  set_grad(a, {0.0});
  set_grad(w, {0.0});
  adam.step();
  adamw.step();
  // Adam: g = 0 + 0.5*2 = 1 -> first step moves by lr: 2 - 0.1 = 1.9
  CHECK(a.item<double>() == doctest::Approx(1.9).epsilon(1e-7));
  // AdamW: p = 2 * (1 - 0.05) = 1.9, then g = 0 gives no Adam step: 1.9
  CHECK(w.item<double>() == doctest::Approx(1.9).epsilon(1e-12));
  set_grad(a, {0.0});
  set_grad(w, {0.0});
  adam.step();
  adamw.step();
  CHECK(w.item<double>() == doctest::Approx(1.9 * 0.95).epsilon(1e-12));
  CHECK(a.item<double>() != doctest::Approx(1.9 * 0.95));  // coupled decay follows the adaptive step instead
}

TEST_CASE("values/clip_grad_norm: scales gradients to the max norm") {
  Tensor a = param({3.0}), b = param({0.0, 4.0});
  set_grad(a, {3.0});
  set_grad(b, {0.0, 4.0});
  const double norm = clip_grad_norm_({a, b}, 1.0);
  CHECK(norm == doctest::Approx(5.0));
  CHECK(a.grad().item<double>() == doctest::Approx(0.6).epsilon(1e-5));
  CHECK(b.grad().to_vector<double>()[1] == doctest::Approx(0.8).epsilon(1e-5));
  CHECK(clip_grad_norm_({a, b}, 10.0) == doctest::Approx(1.0).epsilon(1e-5));  // under the max: unchanged
  CHECK(a.grad().item<double>() == doctest::Approx(0.6).epsilon(1e-5));
}

TEST_CASE("values/lr_schedule: linear warmup then multi-step decay") {
  Tensor p = param({0.0});
  SGD sgd({{{p}, 0.02, 0.0}});
  WarmupMultiStepLR schedule(sgd, {100, 150}, 0.1, /*warmup_iters=*/10, /*warmup_factor=*/0.001);
  CHECK(schedule.lr() == doctest::Approx(0.02 * 0.001));
  schedule.set_step(5);  // alpha = 0.5: 0.001*0.5 + 0.5
  CHECK(schedule.lr() == doctest::Approx(0.02 * 0.5005));
  schedule.set_step(10);
  CHECK(schedule.lr() == doctest::Approx(0.02));
  schedule.set_step(99);
  CHECK(schedule.lr() == doctest::Approx(0.02));
  schedule.step();  // 100: the first milestone
  CHECK(schedule.lr() == doctest::Approx(0.002));
  schedule.set_step(150);
  CHECK(schedule.lr() == doctest::Approx(0.0002));
}

TEST_CASE("values/lr_schedule: cosine from base to the floor") {
  Tensor p = param({0.0});
  SGD sgd({{{p}, 1.0, 0.0}});
  WarmupCosineLR schedule(sgd, /*total_iters=*/100, /*min_factor=*/0.1);
  CHECK(schedule.lr() == doctest::Approx(1.0));
  schedule.set_step(50);
  CHECK(schedule.lr() == doctest::Approx(0.1 + 0.9 * 0.5));
  schedule.set_step(100);
  CHECK(schedule.lr() == doctest::Approx(0.1));
  schedule.set_step(25);
  CHECK(schedule.lr() == doctest::Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 4))));
}

TEST_CASE("errors/optim: bad hyper-parameters and parameters") {
  Tensor p = param({1.0});
  CHECK_THROWS_CONTAINING(SGD({{{p}, -1.0, 0.0}}), "needs a finite lr >= 0");
  CHECK_THROWS_CONTAINING(SGD({{{p}, 0.1, 0.0}}, momentum(0.0, /*nesterov=*/true)), "nesterov");
  CHECK_THROWS_CONTAINING(Adam({{{p}, 0.1, 0.0}}, betas(1.0, 0.999)), "betas");
  CHECK_THROWS_CONTAINING(SGD({{{from_vector<double>({1.0})}, 0.1, 0.0}}), "requires grad");
}

MINIDET_CUDA_TEST_CASE("cuda/optim: SGD and AdamW steps on CUDA match the CPU") {
  Tensor init = randn({1000});
  Tensor g1 = randn({1000}), g2 = randn({1000});
  for (int which = 0; which < 2; ++which) {
    Tensor pc = init.clone().requires_grad_();
    Tensor pg = init.cuda().requires_grad_();
    std::unique_ptr<Optimizer> oc, og;
    if (which == 0) {
      oc = std::make_unique<SGD>(std::vector<ParamGroup>{{{pc}, 0.1, 1e-4}}, momentum(0.9));
      og = std::make_unique<SGD>(std::vector<ParamGroup>{{{pg}, 0.1, 1e-4}}, momentum(0.9));
    } else {
      oc = std::make_unique<AdamW>(std::vector<ParamGroup>{{{pc}, 0.01, 0.05}});
      og = std::make_unique<AdamW>(std::vector<ParamGroup>{{{pg}, 0.01, 0.05}});
    }
    for (const Tensor& g : {g1, g2, g1}) {
      pc.set_grad(g.clone());
      pg.set_grad(g.cuda());
      oc->step();
      og->step();
    }
    CHECK(test::allclose(pg, pc, 1e-5, 1e-6));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/optim: Adam over 100 parameters in multi-tensor launches matches the CPU") {
  // 100 parameters (more than the 48 of one launch), empty and one-element ones among them, in two groups
  // with different rates; parameter 7 has no gradient in the second step, so its step count (and bias
  // correction) differs from its neighbours' afterwards and the runs must be cut around it.
  Generator gen(3);
  std::vector<Tensor> cpu, gpu;
  for (int64_t i = 0; i < 100; ++i) {
    const int64_t n = i % 10 == 0 ? 0 : i % 10 == 1 ? 1 : 37 * i;
    cpu.push_back(randn({n}, kFloat32, &gen).requires_grad_());
    gpu.push_back(cpu.back().detach().cuda().requires_grad_());
  }
  const auto groups = [](const std::vector<Tensor>& p) {
    return std::vector<ParamGroup>{{std::vector<Tensor>(p.begin(), p.begin() + 60), 0.01, 0.05},
                                   {std::vector<Tensor>(p.begin() + 60, p.end()), 0.003, 0.0}};
  };
  AdamW on_cpu(groups(cpu)), on_gpu(groups(gpu));
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < cpu.size(); ++i) {
      autograd::zero_grad(cpu[i]);
      autograd::zero_grad(gpu[i]);
      if (step == 1 && i == 7) continue;
      const Tensor g = randn(cpu[i].sizes(), kFloat32, &gen);
      cpu[i].set_grad(g);
      gpu[i].set_grad(g.cuda());
    }
    on_cpu.step();
    on_gpu.step();
  }
  for (size_t i = 0; i < cpu.size(); ++i) {
    CAPTURE(i);
    CHECK(test::allclose(gpu[i], cpu[i], 1e-5, 1e-6));
  }
}

TEST_CASE("values/sgd: dampening scales the new gradient in the momentum buffer") {
  Tensor p = param({1.0});
  SGDOptions o = momentum(0.9);
  o.dampening = 0.5;
  SGD sgd({{{p}, 0.1, 0.0}}, o);
  set_grad(p, {1.0});
  sgd.step();  // first step: buf = g = 1 (no dampening on the first step), p = 0.9
  set_grad(p, {1.0});
  sgd.step();  // buf = 0.9 + 0.5 * 1 = 1.4, p = 0.9 - 0.14 = 0.76
  CHECK(p.item<double>() == doctest::Approx(0.76));
}

TEST_CASE("errors/optim: a parameter listed twice is refused") {
  Tensor p = param({1.0});
  CHECK_THROWS_CONTAINING(SGD({{{p, p}, 0.1, 0.0}}), "more than once");
  CHECK_THROWS_CONTAINING(SGD({{{p}, 0.1, 0.0}, {{p}, 0.1, 0.0}}), "more than once");
}

TEST_CASE("errors/adam: load_state refuses incomplete aliased and impossible state") {
  Tensor p = param({1.0, 2.0});
  Adam adam({{{p}, 0.1, 0.0}});
  set_grad(p, {1.0, 1.0});
  adam.step();
  const NamedTensors good = adam.state();
  CHECK(good.size() == 3);
  NamedTensors missing(good.begin(), good.begin() + 2);
  CHECK_THROWS_CONTAINING(adam.load_state(missing), "exactly step, exp_avg and exp_avg_sq");
  NamedTensors aliased = good;
  aliased[0].first = "group00.param0.step";  // the same slot spelled differently
  CHECK_THROWS_CONTAINING(adam.load_state(aliased), "canonical");
  NamedTensors zero_step = good;
  zero_step[0].second = from_vector<int64_t>({0});
  CHECK_THROWS_CONTAINING(adam.load_state(zero_step), ">= 1");
  adam.load_state(good);  // and the valid state still loads
}

TEST_CASE("values/optim: state follows its parameter to another dtype") {
  Tensor p = from_vector<float>({1.0f, 2.0f});
  p.requires_grad_();
  AdamW opt({{{p}, 0.1, 0.01}});
  p.set_grad(from_vector<float>({1.0f, -1.0f}));
  opt.step();
  {
    NoGradGuard no_grad;
    p.set_data(p.to(kFloat64));  // what Module::to(kFloat64) does
  }
  p.set_grad(from_vector<double>({1.0, -1.0}));
  opt.step();  // the float32 exp_avg / exp_avg_sq are converted, not misread
  CHECK(opt.state()[1].second.dtype() == kFloat64);
}

TEST_CASE("values/lr_schedule: a scheduler made after a restore does not decay twice") {
  Tensor p = param({0.0});
  SGD sgd({{{p}, 0.02, 0.0}});
  {
    WarmupMultiStepLR first(sgd, {10}, 0.1);
    first.set_step(20);  // lr = 0.002
  }
  WarmupMultiStepLR second(sgd, {10}, 0.1);  // its base is initial_lr 0.02, not the decayed 0.002
  second.set_step(20);
  CHECK(second.lr() == doctest::Approx(0.002));
}
