// Backbone: shapes and stride, parameter layout for both norms, a float64 gradient check of a tiny
// configuration, CUDA against the CPU (forward and every gradient), errors, and a few training steps.
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "models/backbone/backbone.h"
#include "nn/optim/sgd.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/reduction/reduction.h"
#include "tests/models/deformable_helpers.h"
#include "tests/support.h"

using namespace minidet;
using models::Backbone;
using models::BackboneOptions;
using models::NormKind;

namespace {

BackboneOptions tiny_options(NormKind norm) {
  BackboneOptions o;
  o.stem_channels = 2;
  o.widths = {2, 3, 3};
  o.blocks = {1, 2, 1};
  o.strides = {1, 2, 2};
  o.norm = norm;
  return o;
}

bool has_name(const nn::NamedTensors& list, const std::string& name) {
  for (const auto& [n, t] : list)
    if (n == name) return true;
  return false;
}

}  // namespace

TEST_CASE("values/backbone: default configuration gives stride 8 and 128 channels") {
  Generator gen(1);
  BackboneOptions o;
  o.generator = &gen;
  Backbone backbone(o);
  CHECK(backbone.stride() == 8);
  CHECK(backbone.out_channels() == 128);
  NoGradGuard no_grad;
  const Tensor features = backbone.forward(randn({2, 3, 128, 128}, kFloat32, &gen));
  CHECK(features.sizes() == Shape{2, 128, 16, 16});
  // A size that stride 8 does not divide: each stride-2 conv rounds up (100 -> 50 -> 25 -> 13).
  CHECK(backbone.forward(randn({1, 3, 100, 72}, kFloat32, &gen)).sizes() == Shape{1, 128, 13, 9});
  // After ReLU, features are non-negative and not all zero.
  CHECK(min(features).item<double>() >= 0.0);
  CHECK(max(features).item<double>() > 0.0);
}

TEST_CASE("values/backbone: stride and channels follow the options") {
  BackboneOptions o = tiny_options(NormKind::BatchNorm);
  Backbone backbone(o);
  CHECK(backbone.stride() == 8);
  CHECK(backbone.out_channels() == 3);
  NoGradGuard no_grad;
  CHECK(backbone.forward(zeros({3, 3, 32, 24})).sizes() == Shape{3, 3, 4, 3});
  o.strides = {2, 2, 2};
  CHECK(Backbone(o).stride() == 16);
}

TEST_CASE("values/backbone: parameters and buffers for batch norm and frozen batch norm") {
  Backbone bn(tiny_options(NormKind::BatchNorm));
  const nn::NamedTensors params = bn.named_parameters();
  CHECK(has_name(params, "stem.0.weight"));
  CHECK_FALSE(has_name(params, "stem.0.bias"));  // a conv in front of batch norm has no bias
  CHECK(has_name(params, "stem.1.weight"));
  CHECK(has_name(params, "stage1.0.conv1.weight"));
  CHECK_FALSE(has_name(params, "stage1.0.shortcut.0.weight"));  // same width, stride 1: identity shortcut
  CHECK(has_name(params, "stage2.0.shortcut.0.weight"));        // 2 -> 3 channels, stride 2: projection
  CHECK(has_name(params, "stage2.1.conv2.weight"));
  CHECK_FALSE(has_name(params, "stage2.1.shortcut.0.weight"));
  CHECK(has_name(bn.named_buffers(), "stage3.0.norm2.running_var"));
  // The last stage's conv1 is deformable (on by default) and owns its offset predictor; earlier stages not.
  CHECK(has_name(params, "stage3.0.conv1.weight"));
  CHECK(has_name(params, "stage3.0.conv1.offset_conv.weight"));
  CHECK_FALSE(has_name(params, "stage3.0.conv2.offset_conv.weight"));
  CHECK_FALSE(has_name(params, "stage2.1.conv1.offset_conv.weight"));
  CHECK(bn.stages.back()->operator[](0)->named_children()[0].second->type_name() == "DeformConv2d");

  Backbone frozen(tiny_options(NormKind::FrozenBatchNorm));
  const nn::NamedTensors frozen_params = frozen.named_parameters();
  CHECK(has_name(frozen_params, "stem.0.bias"));  // frozen norms learn nothing, so the convs keep a bias
  CHECK_FALSE(has_name(frozen_params, "stem.1.weight"));
  CHECK(has_name(frozen.named_buffers(), "stem.1.weight"));
  // Same conv weights count; batch norm adds 2 per channel of norm, frozen adds a bias per conv output.
  int64_t conv_weights = 0, norm_channels = 0;
  for (const auto& [name, t] : params) {
    if (name.find("norm") != std::string::npos || name.rfind("stem.1", 0) == 0 ||
        name.find("shortcut.1") != std::string::npos)
      norm_channels += t.numel();
    else
      conv_weights += t.numel();
  }
  CHECK(bn.num_parameters() == conv_weights + norm_channels);
  CHECK(frozen.num_parameters() == conv_weights + norm_channels / 2);
}

TEST_CASE("values/backbone: sync batch norm builds SyncBatchNorm2d layers with batch norm's names, same output alone") {
  Generator a(9), b(9);
  BackboneOptions plain = tiny_options(NormKind::BatchNorm), synced = tiny_options(NormKind::SyncBatchNorm);
  plain.generator = &a;
  synced.generator = &b;
  Backbone bn(plain), sync(synced);
  CHECK(sync.named_children()[0].second->named_children()[1].second->type_name() == "SyncBatchNorm2d");
  const nn::NamedTensors p = bn.named_parameters(), q = sync.named_parameters();
  REQUIRE(p.size() == q.size());
  for (size_t i = 0; i < p.size(); ++i) CHECK(p[i].first == q[i].first);
  // One process: SyncBatchNorm2d is BatchNorm2d, bit for bit.
  const Tensor x = test::random_leaf({2, 3, 12, 10}, 3).detach().to(kFloat32);
  CHECK(test::max_abs_diff(bn.forward(x).detach(), sync.forward(x).detach()) == 0.0);
}

TEST_CASE("values/backbone: a seeded generator fixes the initial weights") {
  Generator a(5), b(5);
  BackboneOptions oa = tiny_options(NormKind::BatchNorm), ob = oa;
  oa.generator = &a;
  ob.generator = &b;
  Backbone first(oa), second(ob);
  const auto p1 = first.parameters(), p2 = second.parameters();
  REQUIRE(p1.size() == p2.size());
  for (size_t i = 0; i < p1.size(); ++i) CHECK(p1[i].to_vector<float>() == p2[i].to_vector<float>());
}

TEST_CASE("gradcheck/backbone: tiny configurations with both norms and plain DCNv1 and DCNv2 last stages") {
  struct Case {
    NormKind norm;
    bool deformable, modulated;
  };
  const Case cases[] = {{NormKind::BatchNorm, false, false},
                        {NormKind::BatchNorm, true, false},
                        {NormKind::FrozenBatchNorm, true, true}};
  uint64_t seed = 21;
  for (const Case& c : cases) {
    const std::string what = std::string(models::norm_kind_name(c.norm)) +
                             (c.deformable ? (c.modulated ? " DCNv2" : " DCNv1") : " plain");
    CAPTURE(what);
    Generator gen(seed++);
    BackboneOptions o = tiny_options(c.norm);
    o.deformable_last_stage = c.deformable;
    o.modulated_deformable = c.modulated;
    o.generator = &gen;
    Backbone backbone(o);
    test::perturb_offset_predictors(backbone, seed++);
    backbone.to(kFloat64);
    autograd::TensorList inputs = {test::random_leaf({2, 3, 12, 10}, seed++)};
    for (const Tensor& p : backbone.parameters()) inputs.push_back(p);
    const auto result = autograd::gradcheck([&](const autograd::TensorList& in) { return backbone.forward(in[0]); },
                                            inputs);
    MESSAGE(what << ": " << result.report);
    CHECK_MESSAGE(result.ok, result.report);
    CHECK(result.entries_checked > 0);
  }
}

TEST_CASE("values/backbone: a fresh DCNv1 last stage computes what the plain one does") {
  // Same weights in both (copied by name); zero offsets sample the regular grid, so the outputs agree.
  Generator gen(12);
  BackboneOptions o = tiny_options(NormKind::FrozenBatchNorm);
  o.generator = &gen;
  o.deformable_last_stage = false;
  Backbone plain(o);
  o.deformable_last_stage = true;
  Backbone deformable(o);
  {
    NoGradGuard no_grad;
    const nn::NamedTensors from = plain.named_parameters();
    for (const auto& [name, p] : deformable.named_parameters()) {
      if (name.find("offset_conv") != std::string::npos) continue;
      bool copied = false;
      for (const auto& [other, q] : from)
        if (other == name) {
          p.copy_(q);
          copied = true;
        }
      CHECK_MESSAGE(copied, name);
    }
  }
  const Tensor images = randn({2, 3, 16, 16}, kFloat32, &gen);
  NoGradGuard no_grad;
  CHECK(test::allclose(deformable.forward(images), plain.forward(images), 1e-5, 1e-5));
  // Moving the offsets changes the result: the deformable conv is really in the path.
  test::perturb_offset_predictors(deformable, 13);
  CHECK(test::max_abs_diff(deformable.forward(images), plain.forward(images)) > 1e-3);
}

TEST_CASE("errors/backbone: bad options and bad images") {
  BackboneOptions o;
  o.widths = {};
  o.blocks = {};
  o.strides = {};
  CHECK_THROWS_CONTAINING(Backbone(o), "expected at least one stage");
  o = BackboneOptions();
  o.blocks = {1, 1};
  CHECK_THROWS_CONTAINING(Backbone(o), "one entry per stage");
  o = BackboneOptions();
  o.strides = {1, 3, 2, 1};
  CHECK_THROWS_CONTAINING(Backbone(o), "stage 2 stride must be 1 or 2");
  o = BackboneOptions();
  o.widths = {32, 0, 128, 128};
  CHECK_THROWS_CONTAINING(Backbone(o), "stage 2 needs a positive width");
  o = BackboneOptions();
  o.stem_channels = 0;
  CHECK_THROWS_CONTAINING(Backbone(o), "must be positive");
  Backbone backbone(tiny_options(NormKind::BatchNorm));
  CHECK_THROWS_CONTAINING(backbone.forward(zeros({3, 16, 16})), "expected images of shape (N, 3, H, W)");
  CHECK_THROWS_CONTAINING(backbone.forward(zeros({1, 1, 16, 16})), "expected images of shape (N, 3, H, W)");
  CHECK_THROWS_CONTAINING(backbone.forward(zeros({1, 3, 16, 16}, kInt64)), "Backbone");
}

TEST_CASE("values/backbone: a few SGD steps lower a regression loss on fixed images") {
  Generator gen(3);
  BackboneOptions o = tiny_options(NormKind::BatchNorm);
  o.generator = &gen;
  Backbone backbone(o);
  const Tensor images = randn({4, 3, 16, 16}, kFloat32, &gen);
  const Tensor target = rand({4, 3, 2, 2}, kFloat32, &gen);
  nn::SGD optimizer({{backbone.parameters(), 0.05}});
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    optimizer.zero_grad();
    const Tensor diff = sub(backbone.forward(images), target);
    const Tensor loss = mean(mul(diff, diff));
    loss.backward();
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  MESSAGE("loss " << first << " -> " << last);
  CHECK(last < 0.5 * first);
}

MINIDET_CUDA_TEST_CASE("cuda/backbone: forward and every gradient match the CPU in float32") {
  // Batch norm with a DCNv1 last stage, frozen batch norm with DCNv2; offsets moved off the grid.
  for (NormKind norm : {NormKind::BatchNorm, NormKind::FrozenBatchNorm}) {
    const std::string norm_name = models::norm_kind_name(norm);
    CAPTURE(norm_name);
    BackboneOptions o;  // the real widths, on a small image
    o.norm = norm;
    o.modulated_deformable = norm == NormKind::FrozenBatchNorm;
    Generator gen_cpu(8), gen_gpu(8);
    o.generator = &gen_cpu;
    Backbone on_cpu(o);
    o.generator = &gen_gpu;
    Backbone on_gpu(o);
    test::perturb_offset_predictors(on_cpu, 10);
    test::perturb_offset_predictors(on_gpu, 10);
    on_gpu.to(Device::cuda());
    Generator data(9);
    const Tensor images = randn({2, 3, 32, 40}, kFloat32, &data);
    const Tensor upstream = randn({2, 128, 4, 5}, kFloat32, &data);
    const Tensor y_cpu = on_cpu.forward(images);
    const Tensor y_gpu = on_gpu.forward(images.cuda());
    CHECK(y_gpu.is_cuda());
    CHECK(test::allclose(y_gpu.detach().cpu(), y_cpu.detach(), 1e-3, 1e-4));
    y_cpu.backward(upstream);
    y_gpu.backward(upstream.cuda());
    const nn::NamedTensors p_cpu = on_cpu.named_parameters(), p_gpu = on_gpu.named_parameters();
    REQUIRE(p_cpu.size() == p_gpu.size());
    for (size_t i = 0; i < p_cpu.size(); ++i) {
      CAPTURE(p_cpu[i].first);
      REQUIRE(p_gpu[i].second.grad().defined());
      // Gradients sum over many positions; scale the tolerance to the gradient's size.
      const double scale = minidet::max(minidet::abs(p_cpu[i].second.grad())).item<double>();
      CHECK(test::allclose(p_gpu[i].second.grad().cpu(), p_cpu[i].second.grad(), 1e-3, 1e-4 * (1.0 + scale)));
    }
    // Running statistics moved the same way, and eval mode agrees too.
    const nn::NamedTensors b_cpu = on_cpu.named_buffers(), b_gpu = on_gpu.named_buffers();
    for (size_t i = 0; i < b_cpu.size(); ++i) {
      CAPTURE(b_cpu[i].first);
      CHECK(test::allclose(b_gpu[i].second.cpu().to(kFloat64), b_cpu[i].second.to(kFloat64), 1e-4, 1e-5));
    }
    on_cpu.eval();
    on_gpu.eval();
    NoGradGuard no_grad;
    CHECK(test::allclose(on_gpu.forward(images.cuda()).cpu(), on_cpu.forward(images), 1e-3, 1e-4));
  }
}
