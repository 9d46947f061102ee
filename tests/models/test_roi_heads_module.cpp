// RoI heads, the assembled module: sampling + RoIAlign + box head + losses in training (from padded
// proposals, the RPN's training output), postprocessing in inference (per-image proposals); values, a gradient
// check into the features, errors, and CUDA against the CPU. The parts are tested in test_roi_heads.cpp.
#include <map>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "core/transfer_counts.h"
#include "models/common/padded_proposals.h"
#include "models/roi_heads/roi_heads.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/cat.h"
#include "ops/shape/shape.h"
#include "tests/models/roi_heads_helpers.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using minidet::test::allclose;
using minidet::test::ints;
using minidet::test::values;
using models::RoIHeadsOptions;
using models::RoISample;

namespace {

// A tiny batch for the module: 2 images of 48 x 48 (features 12 x 12 at stride 4), image 0 with the hand
// case's two objects (scaled into the image), image 1 without objects. Proposal corners sit off the pixel
// grid, so RoIAlign's bilinear samples are away from integer lines. Training reads the proposals as one
// padded table (pad_proposals), inference as the per-image list.
struct ModuleCase {
  Tensor features;
  std::vector<Tensor> proposals, gt_boxes, gt_labels;
  models::ImageSizes sizes = {{48, 48}, {48, 44}};
};

ModuleCase module_case(DType dtype, uint64_t seed) {
  ModuleCase c;
  Generator g(seed);
  c.features = randn({2, 2, 12, 12}, kFloat64, &g).to(dtype);
  for (int n = 0; n < 2; ++n) {
    const Tensor corner = add(mul(rand({10, 2}, kFloat64, &g), 30.0), 0.37);
    c.proposals.push_back(cat({corner, add(corner, add(mul(rand({10, 2}, kFloat64, &g), 14.0), 4.13))}, 1).to(dtype));
  }
  c.gt_boxes = {from_vector<double>({2.3, 3.1, 20.7, 18.2, 25.4, 22.6, 41.9, 44.3}, {2, 4}).to(dtype),
                zeros({0, 4}, dtype)};
  c.gt_labels = {from_vector<int64_t>({2, 1}), zeros({0}, kInt64)};
  return c;
}

std::vector<Tensor> on_cuda(std::vector<Tensor> v) {
  for (Tensor& t : v) t = t.cuda();
  return v;
}

Tensor total_loss(const std::map<std::string, Tensor>& losses) {
  return add(losses.at("loss_classifier"), losses.at("loss_box_reg"));
}

}  // namespace

TEST_CASE("values/roi_heads: the module composes sampling RoIAlign the box head and the losses") {
  const ModuleCase c = module_case(kFloat32, 31);
  Generator init(32);
  RoIHeadsOptions o = test::tiny_roi_heads_options();
  o.generator = &init;
  models::RoIHeads heads(o);
  std::vector<std::string> names;
  for (const auto& [name, t] : heads.named_parameters()) names.push_back(name);
  CHECK(names.front() == "box_head.fc6.weight");
  CHECK(names.back() == "box_head.bbox_pred.bias");
  CHECK(heads.box_head->fc6->weight.sizes() == Shape({6, 2 * 7 * 7}));

  Generator a(33), b(33);
  const models::PaddedProposals padded = models::pad_proposals(c.proposals);
  const auto losses = heads.forward_train(c.features, padded, c.gt_boxes, c.gt_labels, &a);
  const RoISample s = models::sample_rois_padded(padded, c.gt_boxes, c.gt_labels, o, &b);
  const auto manual = models::roi_heads_loss(heads.forward_box_head(c.features, s.rois), s);
  CHECK(losses.at("loss_classifier").item<double>() == manual.at("loss_classifier").item<double>());
  CHECK(losses.at("loss_box_reg").item<double>() == manual.at("loss_box_reg").item<double>());
  CHECK(losses.at("loss_classifier").item<double>() > 0.0);
  CHECK(losses.at("loss_box_reg").item<double>() > 0.0);
  CHECK(losses.at("loss_classifier").requires_grad());

  const auto detections = heads.forward_infer(c.features, models::pad_proposals(c.proposals), c.sizes);
  REQUIRE(detections.size() == 2);
  for (size_t n = 0; n < 2; ++n) {
    const std::vector<double> boxes = values(detections[n].boxes);
    CHECK(detections[n].boxes.size(0) <= o.detections_per_image);
    CHECK_FALSE(detections[n].scores.requires_grad());
    for (size_t i = 0; i < boxes.size(); i += 4) {  // clipped to its own image
      CHECK(boxes[i] >= 0.0);
      CHECK(boxes[i + 2] <= static_cast<double>(c.sizes[n][1]));
      CHECK(boxes[i + 3] <= static_cast<double>(c.sizes[n][0]));
    }
  }
}

TEST_CASE("values/roi_heads: a seed fixes the sample and proposals get no gradient") {
  ModuleCase c = module_case(kFloat64, 71);
  RoIHeadsOptions o = test::tiny_roi_heads_options();
  o.batch_size_per_image = 6;  // fewer slots than candidates: the draw matters
  const models::PaddedProposals padded = models::pad_proposals(c.proposals);
  auto sample_with = [&](uint64_t seed) {
    Generator gen(seed);
    return models::sample_rois_padded(padded, c.gt_boxes, c.gt_labels, o, &gen);
  };
  const RoISample first = sample_with(5), again = sample_with(5);
  CHECK(values(first.rois) == values(again.rois));
  CHECK(ints(first.labels) == ints(again.labels));
  bool any_different = false;
  for (uint64_t seed = 6; seed < 12 && !any_different; ++seed)
    any_different = values(sample_with(seed).rois) != values(first.rois);
  CHECK(any_different);

  // Proposals are detached, as in torchvision: the loss reaches the features, never the proposal boxes.
  models::PaddedProposals tracked = models::pad_proposals(c.proposals);
  tracked.boxes.requires_grad_();
  models::RoIHeads heads(o);
  heads.to(kFloat64);
  const Tensor features = c.features.clone().requires_grad_();
  Generator gen(7);
  total_loss(heads.forward_train(features, tracked, c.gt_boxes, c.gt_labels, &gen)).backward();
  CHECK(features.grad().defined());
  CHECK_FALSE(tracked.boxes.grad().defined());
}

TEST_CASE("gradcheck/roi_heads: the training loss through the FC layers and RoIAlign into the features") {
  ModuleCase c = module_case(kFloat64, 41);
  Generator init(42);
  RoIHeadsOptions o = test::tiny_roi_heads_options();
  o.representation_size = 5;
  o.generator = &init;
  models::RoIHeads heads(o);
  heads.to(kFloat64);
  TensorList inputs = {c.features.requires_grad_()};
  for (const Tensor& p : heads.parameters()) inputs.push_back(p);
  const models::PaddedProposals padded = models::pad_proposals(c.proposals);
  const auto fn = [&](const TensorList& in) {
    Generator gen(43);  // every evaluation samples the same rows
    const auto losses = heads.forward_train(in[0], padded, c.gt_boxes, c.gt_labels, &gen);
    return stack({losses.at("loss_classifier"), losses.at("loss_box_reg")}, 0);
  };
  const auto result = autograd::gradcheck(fn, inputs);
  MESSAGE(result.report);
  CHECK_MESSAGE(result.ok, result.report);
  CHECK(result.entries_checked > 0);
}

TEST_CASE("errors/roi_heads: the module's inputs and options") {
  const ModuleCase c = module_case(kFloat32, 51);
  RoIHeadsOptions bad = test::tiny_roi_heads_options();
  bad.representation_size = 0;
  CHECK_THROWS_CONTAINING(models::RoIHeads(bad), "representation_size must be positive");
  bad = test::tiny_roi_heads_options();
  bad.fg_iou_threshold = 0.3;
  bad.bg_iou_threshold = 0.6;
  CHECK_THROWS_CONTAINING(models::RoIHeads(bad), "expected bg_iou_threshold <= fg_iou_threshold");

  models::RoIHeads heads(test::tiny_roi_heads_options());
  const models::PaddedProposals padded = models::pad_proposals(c.proposals);
  CHECK_THROWS_CONTAINING(heads.forward_train(zeros({2, 3, 12, 12}), padded, c.gt_boxes, c.gt_labels),
                          "expected features of shape (2, 2, h, w)");
  CHECK_THROWS_CONTAINING(
      heads.forward_train(c.features, models::pad_proposals({c.proposals[0]}), c.gt_boxes, c.gt_labels),
      "expected features of shape (1, 2, h, w)");
  CHECK_THROWS_CONTAINING(heads.forward_train(c.features.to(kFloat64), padded, c.gt_boxes, c.gt_labels),
                          "RoIHeads::forward_train");
  CHECK_THROWS_CONTAINING(heads.forward_train(c.features, {padded.boxes.select(0, 0), padded.counts}, c.gt_boxes,
                                              c.gt_labels),
                          "RoIHeads::forward_train: expected padded proposals of shape (N, P, 4) (x1, y1, x2, y2), got (10, 4)");
  CHECK_THROWS_CONTAINING(heads.forward_train(c.features, {}, c.gt_boxes, c.gt_labels),
                          "RoIHeads::forward_train: the padded proposals' boxes are undefined");
  CHECK_THROWS_CONTAINING(heads.forward_train(c.features, padded, {c.gt_boxes[0]}, c.gt_labels),
                          "expected one gt_boxes and one gt_labels tensor per image (2 images), got 1 and 2");
  const std::vector<Tensor> bad_labels = {from_vector<int64_t>({2, 3}), c.gt_labels[1]};
  CHECK_THROWS_CONTAINING(heads.forward_train(c.features, padded, c.gt_boxes, bad_labels),
                          "expected gt_labels[0] in 1..2 (0 is background), got 3 at index 1");
  CHECK_THROWS_CONTAINING(heads.forward_infer(c.features, models::pad_proposals(c.proposals), {{48, 48}}),
                          "one image size per image (2)");
  const Tensor nan_proposals = from_vector<float>({1, 1, NAN, 5}, {1, 4});
  CHECK_THROWS_CONTAINING(
      heads.forward_infer(c.features, models::pad_proposals({nan_proposals, c.proposals[1]}), c.sizes), "roi_align");
}

MINIDET_CUDA_TEST_CASE("cuda/roi_heads: the module's losses gradients and detections match the CPU") {
  const ModuleCase c = module_case(kFloat32, 61);
  Generator init_cpu(62), init_gpu(62);
  RoIHeadsOptions o = test::tiny_roi_heads_options();
  o.generator = &init_cpu;
  models::RoIHeads cpu_heads(o);
  o.generator = &init_gpu;
  models::RoIHeads gpu_heads(o);
  gpu_heads.to(Device::cuda());

  // Training: the same generator state samples the same rows, so losses and every gradient agree.
  TensorList results[2];
  for (int device = 0; device < 2; ++device) {
    models::RoIHeads& heads = device ? gpu_heads : cpu_heads;
    Generator gen(63);
    const Tensor features = (device ? c.features.cuda() : c.features.clone()).requires_grad_();
    const auto losses = device ? heads.forward_train(features, models::pad_proposals(on_cuda(c.proposals)),
                                                     on_cuda(c.gt_boxes), on_cuda(c.gt_labels), &gen)
                               : heads.forward_train(features, models::pad_proposals(c.proposals), c.gt_boxes,
                                                     c.gt_labels, &gen);
    total_loss(losses).backward();
    results[device] = {losses.at("loss_classifier").detach().cpu(), losses.at("loss_box_reg").detach().cpu(),
                       features.grad().cpu()};
    for (const Tensor& p : heads.parameters()) results[device].push_back(p.grad().cpu());
  }
  REQUIRE(results[0].size() == results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) {
    CAPTURE(i);
    CHECK(allclose(results[1][i], results[0][i], 1e-4, 1e-5));
  }

  // Deterministic mode: two CUDA runs give the same bits (RoIAlign's backward scatters with atomics otherwise).
  {
    DeterministicGuard deterministic;
    std::vector<float> bits[2];
    for (int run = 0; run < 2; ++run) {
      gpu_heads.zero_grad();
      Generator gen(64);
      const Tensor features = c.features.cuda().requires_grad_();
      total_loss(gpu_heads.forward_train(features, models::pad_proposals(on_cuda(c.proposals)), on_cuda(c.gt_boxes),
                                         on_cuda(c.gt_labels), &gen))
          .backward();
      bits[run] = features.grad().to_vector<float>();
    }
    CHECK(bits[0] == bits[1]);
  }

  // Inference.
  const auto on_cpu = cpu_heads.forward_infer(c.features, models::pad_proposals(c.proposals), c.sizes);
  const auto on_gpu = gpu_heads.forward_infer(c.features.cuda(), models::pad_proposals(on_cuda(c.proposals)), c.sizes);
  for (size_t n = 0; n < 2; ++n) {
    CAPTURE(n);
    REQUIRE(on_gpu[n].boxes.sizes() == on_cpu[n].boxes.sizes());
    CHECK(ints(on_gpu[n].labels) == ints(on_cpu[n].labels));
    CHECK(allclose(on_gpu[n].boxes.cpu(), on_cpu[n].boxes, 1e-5, 1e-4));
    CHECK(allclose(on_gpu[n].scores.cpu(), on_cpu[n].scores, 1e-5, 1e-6));
  }
}

MINIDET_CUDA_TEST_CASE("cuda/roi_heads: inference's copies between host and device do not grow with the batch") {
  // The same two images, then three times over (6 images): every launch and copy of inference is one for the
  // whole batch (roi_heads.h lists them), so both batches make the same copies. Each image's detections are
  // also those of its twin in the smaller batch, and its tensors are contiguous views on the device.
  const ModuleCase c = module_case(kFloat32, 71);
  Generator init(72);
  RoIHeadsOptions o = test::tiny_roi_heads_options();
  o.generator = &init;
  o.check_proposal_values = false;  // as FasterRCNN runs it
  models::RoIHeads heads(o);
  heads.to(Device::cuda());
  TransferCounts counts[2];
  std::vector<models::Detections> found[2];
  for (int big = 0; big < 2; ++big) {
    const int repeats = big ? 3 : 1;
    std::vector<Tensor> features, proposals;
    models::ImageSizes sizes;
    for (int r = 0; r < repeats; ++r) {
      features.push_back(c.features.cuda());
      for (size_t n = 0; n < 2; ++n) {
        proposals.push_back(c.proposals[n].cuda());
        sizes.push_back(c.sizes[n]);
      }
    }
    const Tensor batch = cat(features, 0);
    const models::PaddedProposals table = models::pad_proposals(proposals);
    heads.forward_infer(batch, table, sizes);  // warm-up: nothing set up once is counted
    const TransferCounts before = transfer_counts();
    found[big] = heads.forward_infer(batch, table, sizes);
    counts[big] = transfer_counts() - before;
  }
  MESSAGE("RoIHeads::forward_infer on CUDA, 2 and 6 images: "
          << counts[0].device_to_host << " and " << counts[1].device_to_host << " device-to-host, "
          << counts[0].host_to_device << " and " << counts[1].host_to_device << " host-to-device copies");
  CHECK(counts[1].device_to_host == counts[0].device_to_host);
  CHECK(counts[1].host_to_device == counts[0].host_to_device);
  CHECK(counts[0].device_to_host == 3);  // the candidates' count, NMS's kept count, the kept rows
  CHECK(counts[0].host_to_device == 2);  // the two result tables (every index is a shared arange, uploaded once)
  REQUIRE(found[1].size() == 6);
  for (size_t n = 0; n < 6; ++n) {
    CAPTURE(n);
    const models::Detections &mine = found[1][n], &twin = found[0][n % 2];
    CHECK(mine.boxes.is_cuda());
    CHECK(mine.boxes.is_contiguous());
    CHECK(mine.scores.is_contiguous());
    CHECK(twin.boxes.size(0) > 0);
    CHECK(ints(mine.labels) == ints(twin.labels));
    // The box head's GEMMs see 60 rows instead of 20, so cuBLAS may sum in another order: within 1e-5.
    CHECK(allclose(mine.boxes.cpu(), twin.boxes.cpu(), 1e-5, 1e-4));
    CHECK(allclose(mine.scores.cpu(), twin.scores.cpu(), 1e-5, 1e-6));
  }
}
