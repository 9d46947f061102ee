// Bad inputs of a training step, beyond test_module_table.cpp: every optimizer hyper-parameter that can be
// out of range (NaN included, which plain "x < 0" checks let through), gradients that do not fit their
// parameter, optimizer state that does not fit, schedules, and the detector's images and targets. Each row
// must throw minidet::Error naming the function or class and what was wrong; the legal edge cases (a
// parameter without a gradient) are checked at the end with their documented result.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/factories.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "nn/nn.h"
#include "ops/elementwise/binary.h"
#include "tests/errors/bad_call.h"
#include "tests/models/tiny_detector.h"
#include "tests/support.h"

using namespace minidet;

using test::BadCall;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Tensor param(const Shape& shape = {3}) {
  Tensor p = rand(shape);
  p.requires_grad_(true);
  return p;
}
std::vector<nn::ParamGroup> group(double lr, double decay = 0.0) { return {nn::ParamGroup{{param()}, lr, decay}}; }
nn::AdamOptions betas(double beta1, double beta2, double eps = 1e-8) { return {beta1, beta2, eps, false}; }

}  // namespace

TEST_CASE("errors/training_table: optimizer hyper-parameters out of range, NaN and Inf included") {
  const std::vector<BadCall> rows = {
      {"optimizer: group 0 has no parameters", "an empty parameter list",
       [] { nn::SGD(std::vector<nn::ParamGroup>{nn::ParamGroup{{}, 0.1}}); }},
      {"optimizer: group 1 has no parameters", "a second group that is empty",
       [] { nn::Adam(std::vector<nn::ParamGroup>{{{param()}, 0.1}, {{}, 0.1}}); }},
      {"optimizer: group 0 needs a finite lr >= 0, got inf", "an infinite learning rate", [] { nn::SGD(group(kInf)); }},
      {"optimizer: group 0 needs a finite lr >= 0, got -0.001", "Adam with a negative learning rate",
       [] { nn::Adam(group(-1e-3)); }},
      {"optimizer: group 1 needs a finite lr >= 0, got nan", "a NaN learning rate in the second group",
       [] { nn::AdamW(std::vector<nn::ParamGroup>{{{param()}, 0.1}, {{param()}, kNaN}}); }},
      {"optimizer: group 0 needs a finite weight_decay >= 0, got nan", "a NaN weight decay",
       [] { nn::AdamW(group(0.1, kNaN)); }},
      {"optimizer: group 0 needs a finite weight_decay >= 0, got -0.05", "AdamW with a negative weight decay",
       [] { nn::AdamW(group(0.1, -0.05)); }},
      {"optimizer: group 0 needs a finite weight_decay >= 0, got inf", "an infinite weight decay",
       [] { nn::SGD(group(0.1, kInf)); }},
      {"Adam: betas must lie in [0, 1), got 0.9 and 1", "beta2 = 1", [] { nn::Adam(group(0.1), betas(0.9, 1.0)); }},
      {"Adam: betas must lie in [0, 1), got -0.1 and 0.999", "a negative beta1",
       [] { nn::Adam(group(0.1), betas(-0.1, 0.999)); }},
      {"Adam: betas must lie in [0, 1), got 0.9 and nan", "a NaN beta2",
       [] { nn::Adam(group(0.1), betas(0.9, kNaN)); }},
      {"Adam: betas must lie in [0, 1), got 1.5 and 0.999", "AdamW with beta1 > 1",
       [] { nn::AdamW(group(0.1), betas(1.5, 0.999)); }},
      {"Adam: eps must be a finite number >= 0, got nan", "a NaN eps",
       [] { nn::Adam(group(0.1), betas(0.9, 0.999, kNaN)); }},
      {"Adam: eps must be a finite number >= 0, got inf", "an infinite eps",
       [] { nn::Adam(group(0.1), betas(0.9, 0.999, kInf)); }},
      {"SGD: momentum must be a finite number >= 0, got nan", "a NaN momentum",
       [] { nn::SGD(group(0.1), nn::SGDOptions{kNaN, 0.0, false}); }},
      {"SGD: momentum must be a finite number >= 0, got inf", "an infinite momentum",
       [] { nn::SGD(group(0.1), nn::SGDOptions{kInf, 0.0, false}); }},
      {"SGD: dampening must lie in [0, 1], got 2", "dampening 2",
       [] { nn::SGD(group(0.1), nn::SGDOptions{0.9, 2.0, false}); }},
      {"SGD: dampening must lie in [0, 1], got nan", "a NaN dampening",
       [] { nn::SGD(group(0.1), nn::SGDOptions{0.9, kNaN, false}); }},
      {"SGD: nesterov needs momentum > 0 and dampening 0", "nesterov with dampening",
       [] { nn::SGD(group(0.1), nn::SGDOptions{0.9, 0.5, true}); }},
  };
  test::check_bad_calls(rows);
}

TEST_CASE("errors/training_table: parameters and gradients that do not fit") {
  const std::vector<BadCall> rows = {
      {"optimizer: group 0 parameter 0 is not contiguous", "a transposed parameter",
       [] {
         Tensor p = rand({4, 3}).t();
         p.requires_grad_(true);
         nn::SGD(std::vector<nn::ParamGroup>{nn::ParamGroup{{p}, 0.1}});
       }},
      {"optimizer: group 0 parameter 1 is not a leaf tensor that requires grad", "a computed tensor as a parameter",
       [] {
         Tensor p = param();
         nn::SGD(std::vector<nn::ParamGroup>{nn::ParamGroup{{p, p * 2.0}, 0.1}});
       }},
      {"optimizer: group 0 parameter 0 is not a leaf tensor that requires grad", "an int64 tensor as a parameter",
       [] { nn::Adam(std::vector<nn::ParamGroup>{nn::ParamGroup{{zeros({3}, kInt64)}, 0.1}}); }},
      {"Tensor::set_grad: gradient (4,) float32", "a gradient of another shape",
       [] { param({3}).set_grad(zeros({4})); }},
      {"Tensor::set_grad: gradient (3,) float64", "a float64 gradient for a float32 parameter",
       [] { param({3}).set_grad(zeros({3}, kFloat64)); }},
      {"clip_grad_norm_: max_norm must be >= 0, got nan", "a NaN max norm",
       [] { nn::clip_grad_norm_({param()}, kNaN); }},
  };
  test::check_bad_calls(rows);
}

TEST_CASE("errors/training_table: optimizer state and schedules that do not fit") {
  auto stepped_adam = [] {
    auto adam = std::make_shared<nn::Adam>(group(0.1));
    Tensor p = adam->param_groups()[0].params[0];
    p.set_grad(ones({3}));
    adam->step();
    return adam;
  };
  const std::vector<BadCall> rows = {
      {"optimizer state: 'group0.param0.exp_avg' has shape (4,)", "exp_avg of the wrong shape",
       [&] {
         auto adam = stepped_adam();
         nn::NamedTensors state = adam->state();
         for (auto& [name, value] : state)
           if (name == "group0.param0.exp_avg") value = zeros({4});
         adam->load_state(state);
       }},
      {"optimizer state: 'group0.param7.step' names a parameter this optimizer does not have",
       "state of a parameter that is not there",
       [&] {
         auto adam = stepped_adam();
         nn::NamedTensors state = adam->state();
         for (auto& entry : state) entry.first.replace(entry.first.find("param0"), 6, "param7");
         adam->load_state(state);
       }},
      {"optimizer state: bad entry name 'weights'", "an entry that is not optimizer state",
       [&] { stepped_adam()->load_state({{"weights", zeros({3})}}); }},
      {"SGD state: unknown entry 'group0.param0.exp_avg'", "Adam's moment given to SGD",
       [] {
         nn::SGD sgd(group(0.1), nn::SGDOptions{0.9, 0.0, false});
         sgd.load_state({{"group0.param0.exp_avg", zeros({3})}});
       }},
      {"LRScheduler::set_step: negative step -1", "a negative step",
       [] {
         nn::SGD sgd(group(0.1));
         nn::WarmupCosineLR(sgd, 10).set_step(-1);
       }},
      {"LRScheduler: the optimizer now has 2 parameter groups but the scheduler was made for 1",
       "a group added after the scheduler was made",
       [] {
         nn::SGD sgd(group(0.1));
         nn::WarmupCosineLR schedule(sgd, 10);
         sgd.param_groups().push_back(nn::ParamGroup{{param()}, 0.1});
         schedule.step();
       }},
      {"WarmupMultiStepLR: gamma must be a finite number > 0, got nan", "a NaN gamma",
       [] {
         nn::SGD sgd(group(0.1));
         nn::WarmupMultiStepLR(sgd, {5}, kNaN);
       }},
      {"WarmupMultiStepLR: negative warmup_iters", "negative warm-up",
       [] {
         nn::SGD sgd(group(0.1));
         nn::WarmupMultiStepLR(sgd, {5}, 0.1, -2);
       }},
      {"WarmupMultiStepLR: warmup_factor must lie in [0, 1], got 2", "a warm-up factor above 1",
       [] {
         nn::SGD sgd(group(0.1));
         nn::WarmupMultiStepLR(sgd, {5}, 0.1, 2, 2.0);
       }},
      {"WarmupCosineLR: min_factor must lie in [0, 1], got -0.5", "a negative floor",
       [] {
         nn::SGD sgd(group(0.1));
         nn::WarmupCosineLR(sgd, 10, -0.5);
       }},
      {"WarmupCosineLR: negative warmup_iters", "negative warm-up",
       [] {
         nn::SGD sgd(group(0.1));
         nn::WarmupCosineLR(sgd, 10, 0.0, -1);
       }},
      {"WarmupCosineLR: warmup_factor must lie in [0, 1], got nan", "a NaN warm-up factor",
       [] {
         nn::SGD sgd(group(0.1));
         nn::WarmupCosineLR(sgd, 10, 0.0, 2, kNaN);
       }},
  };
  test::check_bad_calls(rows);
}

TEST_CASE("errors/training_table: the detector refuses bad images and targets by name") {
  Generator init(5);
  models::FasterRCNN model(test::tiny_detector_config(), &init);
  const Tensor images = rand({1, 3, 32, 32}, kFloat32, &init);
  const std::vector<Tensor> boxes = {from_vector<float>({2, 2, 20, 20}, {1, 4})};
  const std::vector<Tensor> labels = {from_vector<int64_t>({1}, {1})};
  auto train = [&](const Tensor& im, const std::vector<Tensor>& bx, const std::vector<Tensor>& lb) {
    return [&model, im, bx, lb] { model.forward_train(im, bx, lb); };
  };
  auto box = [](std::vector<float> v) { return std::vector<Tensor>{from_vector<float>(v, {1, 4})}; };
  const std::string train_op = "FasterRCNN::forward_train: ", infer_op = "FasterRCNN::forward_infer: ";
  const std::vector<BadCall> rows = {
      {train_op, "undefined images", train(Tensor(), boxes, labels)},
      {train_op + "expected images of shape (N, 3, H, W), got (1, 3, 32, 32, 1)", "5-D images",
       train(rand({1, 3, 32, 32, 1}), boxes, labels)},
      {train_op + "expected images of shape (N, 3, H, W), got (1, 4, 32, 32)", "4 channels",
       train(rand({1, 4, 32, 32}), boxes, labels)},
      {train_op + "images are uint8 on cpu but the model is float32 on cpu", "uint8 images",
       train(zeros({1, 3, 32, 32}, kUInt8), boxes, labels)},
      {train_op + "expected at least one non-empty image, got (1, 3, 0, 32)", "an image of height 0",
       train(rand({1, 3, 0, 32}), {zeros({0, 4})}, {zeros({0}, kInt64)})},
      {train_op + "expected one boxes and one labels tensor per image (2), got 1 and 1", "targets for 1 of 2 images",
       train(rand({2, 3, 32, 32}), boxes, labels)},
      {train_op + "boxes[0] or labels[0] is undefined", "an undefined boxes tensor",
       train(images, {Tensor()}, labels)},
      {train_op + "box 0 of image 0 (nan, nan, nan, nan) is not finite", "an all-NaN box",
       train(images, box({NAN, NAN, NAN, NAN}), labels)},
      {train_op + "box 0 of image 0 (2, 2, 20, -inf) is not finite", "a -Inf coordinate",
       train(images, box({2, 2, 20, -INFINITY}), labels)},
      {train_op + "label 0 of image 0 is -1, expected a class in 1..2", "a negative label",
       train(images, boxes, {from_vector<int64_t>({-1}, {1})})},
      {train_op + "label 0 of image 0 is 1000000, expected a class in 1..2", "a label far out of range",
       train(images, boxes, {from_vector<int64_t>({1000000}, {1})})},
      {infer_op + "expected images of shape (N, 3, H, W), got (3, 32, 32)", "inference on an unbatched image",
       [&] { model.forward_infer(rand({3, 32, 32})); }},
      {infer_op + "expected at least one non-empty image, got (0, 3, 32, 32)", "inference on an empty batch",
       [&] { model.forward_infer(rand({0, 3, 32, 32})); }},
  };
  test::check_bad_calls(rows);
}

TEST_CASE("values/training_table: a parameter without a gradient is left as it is, as in PyTorch") {
  // Not an error: a frozen branch or an unused head has no gradient this step, and step() skips it.
  Tensor used = param(), unused = param();
  const std::vector<float> before = unused.to_vector<float>();
  nn::AdamW adam(std::vector<nn::ParamGroup>{{{used, unused}, 0.1, 0.01}});
  used.set_grad(ones({3}));
  adam.step();
  CHECK(unused.to_vector<float>() == before);
  CHECK(!unused.grad().defined());
  CHECK(adam.state().size() == 3);  // state only for the parameter that had a gradient
}

MINIDET_CUDA_TEST_CASE("cuda/training_table: a gradient on another device than its parameter is refused") {
  Tensor cpu_param = param({3});
  CHECK_THROWS_CONTAINING(cpu_param.set_grad(zeros({3}, Device::cuda())),
                          "Tensor::set_grad: gradient (3,) float32 on cuda:0 does not match tensor (3,) float32 on "
                          "cpu");
  Tensor gpu_param = zeros({3}, Device::cuda());
  gpu_param.requires_grad_(true);
  CHECK_THROWS_CONTAINING(gpu_param.set_grad(zeros({3})), "on cpu does not match tensor (3,) float32 on cuda:0");
  // After refusing, both still train on their own device.
  const std::vector<float> cpu_before = cpu_param.detach().to_vector<float>();
  nn::SGD sgd(std::vector<nn::ParamGroup>{{{cpu_param, gpu_param}, 0.5}});
  cpu_param.set_grad(ones({3}));
  gpu_param.set_grad(ones({3}, Device::cuda()));
  sgd.step();
  const std::vector<float> cpu_after = cpu_param.detach().to_vector<float>();
  for (size_t i = 0; i < cpu_after.size(); ++i) CHECK(cpu_after[i] == doctest::Approx(cpu_before[i] - 0.5f));
  CHECK(gpu_param.detach().cpu().to_vector<float>() == std::vector<float>(3, -0.5f));
}
