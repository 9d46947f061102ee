// minidet's half of the parity check against torchvision (bench/detector_parity.py runs the other half and
// compares; docs/parity.md). It runs the detector on a fixed batch and writes every intermediate tensor as a
// named entry of one checkpoint-format file (docs/checkpoint-format.md), which the twin reads.
//
//   parity_minidet --out minidet.dump [--weights W.ckpt | --seed S --save-weights W.ckpt]
//                  [--dtype float32|float64] [--device cpu|cuda] [--steps T] [--set detector.key=value ...]
//
// The batch: the first 8 test images of the synthetic shapes (128 px, seed 0) that hold objects, then the
// first one that holds none. What is written, with N images, K anchors and the entry names:
//   input.images (N, 3, H, W), input.boxes.<n>, input.labels.<n>
//   eval mode, no gradient (the RPN's and RoI heads' test settings):
//     eval.features (N, F, h, w); eval.objectness (N, A, h, w); eval.deltas (N, 4A, h, w); eval.anchors (K, 4)
//     eval.proposals.<n> (P_n, 4); eval.pooled (sum P_n, F, 7, 7), RoIAlign on those proposals;
//     eval.class_logits, eval.box_deltas; eval.detections.<n>.{boxes,scores,labels}
//   training mode, steps 0..T-1 (T = --steps, default 1) of AdamW (lr 3e-3, weight decay 1e-4, no schedule)
//   on the same batch, for step t:
//     step<t>.proposals.<n> (P_n, 4), the training proposals the RoI heads sample from;
//     step<t>.rpn_positive, step<t>.rpn_negative (N, K) bool: the RPN's sampled anchors;
//     step<t>.roi_candidate.<n> (S_n) int64: the sampled RoIs as rows of cat(proposals, ground truth), in
//       increasing order (torchvision's sampled order);
//     step<t>.loss.<name>; step<t>.grad.<parameter name> for every parameter; after the last step,
//     final.<parameter or buffer name>.
// The samplers' draws are recovered by replaying the generator from its state before the step, and the step's
// own losses are recomputed from them as a check (they must agree to the last bit).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "core/factories.h"
#include "data/loader/loader.h"
#include "data/shapes/shapes_dataset.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "models/rpn/rpn_loss.h"
#include "models/sampler/sampler.h"
#include "nn/checkpoint/checkpoint.h"
#include "nn/optim/adam.h"
#include "ops/indexing/index_select.h"
#include "ops/roi_align/roi_align.h"
#include "ops/shape/shape.h"

using namespace minidet;

namespace {

// 8 test images with objects, then 1 without.
data::Batch parity_batch(int64_t image_size) {
  data::ShapesOptions options;
  options.image_width = options.image_height = image_size;
  options.test_images = 200;
  const data::ShapesDataset test(data::Split::kTest, options);
  std::vector<data::Sample> samples;
  std::vector<int64_t> indices;
  int64_t empty = -1;
  for (int64_t i = 0; i < test.size() && (samples.size() < 8 || empty < 0); ++i) {
    data::Sample sample = test.get(i);
    if (sample.boxes.empty() && empty < 0) {
      empty = i;
    } else if (!sample.boxes.empty() && samples.size() < 8) {
      samples.push_back(std::move(sample));
      indices.push_back(i);
    }
  }
  MINIDET_CHECK(samples.size() == 8 && empty >= 0, "parity_minidet: the test split lacks 8 images with objects and 1 without");
  samples.push_back(test.get(empty));
  indices.push_back(empty);
  return data::collate(samples, indices);
}

// The sampled RoIs of one image as rows of its candidates cat(proposals, gt): each sampled roi is an exact copy
// of one candidate, so equality finds it (identical candidates are interchangeable: same label, same target).
Tensor candidate_rows(const Tensor& candidates, const Tensor& sampled) {
  const std::vector<double> c = candidates.to(kFloat64).contiguous().to_vector<double>();
  const std::vector<double> s = sampled.to(kFloat64).contiguous().to_vector<double>();
  std::vector<int64_t> rows;
  for (size_t k = 0; k < s.size() / 4; ++k) {
    int64_t found = -1;
    for (size_t i = 0; i < c.size() / 4 && found < 0; ++i)
      if (c[4 * i] == s[4 * k] && c[4 * i + 1] == s[4 * k + 1] && c[4 * i + 2] == s[4 * k + 2] &&
          c[4 * i + 3] == s[4 * k + 3])
        found = static_cast<int64_t>(i);
    MINIDET_CHECK(found >= 0, "parity_minidet: a sampled RoI is none of its image's candidates");
    rows.push_back(found);
  }
  std::sort(rows.begin(), rows.end());
  return from_vector<int64_t>(rows, {static_cast<int64_t>(rows.size())});
}

void put_eval(nn::Checkpoint& out, models::FasterRCNN& model, const data::Batch& batch, const Tensor& images) {
  model.eval();
  NoGradGuard no_grad;
  const std::array<int64_t, 2> size{images.size(2), images.size(3)};
  const Tensor features = (*model.backbone)(images);
  const models::RPNHeadOutput head = (*model.rpn->head)(features);
  out.put("eval.features", features);
  out.put("eval.objectness", head.objectness);
  out.put("eval.deltas", head.deltas);
  out.put("eval.anchors", model.rpn->anchors(size, features));
  // Each image's proposals: the first counts[n] rows of its slots in the RPN's table.
  const models::PaddedProposals table = model.rpn->forward_infer(features, size, batch.image_sizes);
  const std::vector<int64_t> counts = table.counts.cpu().to_vector<int64_t>();
  std::vector<Tensor> proposals, rois;
  for (int64_t n = 0; n < table.boxes.size(0); ++n)
    proposals.push_back(table.boxes.select(0, n).narrow(0, 0, counts[static_cast<size_t>(n)]));
  for (size_t n = 0; n < proposals.size(); ++n) {
    out.put("eval.proposals." + std::to_string(n), proposals[n]);
    const Tensor index = full({proposals[n].size(0), 1}, static_cast<double>(n), proposals[n].options());
    rois.push_back(cat({index, proposals[n]}, 1));
  }
  const models::RoIHeadsOptions& o = model.roi_heads->options();
  const Tensor pooled = roi_align(features, cat(rois, 0),
                                  RoIAlignOptions()
                                      .set_output_size(o.pooled_size)
                                      .set_spatial_scale(1.0 / static_cast<double>(o.feature_stride))
                                      .set_sampling_ratio(o.sampling_ratio)
                                      .set_aligned(o.aligned));
  const models::BoxHeadOutput box = model.roi_heads->box_head->forward(pooled);
  out.put("eval.pooled", pooled);
  out.put("eval.class_logits", box.class_logits);
  out.put("eval.box_deltas", box.box_deltas);
  const std::vector<models::Detections> found = model.forward_infer(images, batch.image_sizes);
  for (size_t n = 0; n < found.size(); ++n) {
    const std::string prefix = "eval.detections." + std::to_string(n);
    out.put(prefix + ".boxes", found[n].boxes);
    out.put(prefix + ".scores", found[n].scores);
    out.put(prefix + ".labels", found[n].labels);
  }
}

// One training step as FasterRCNN::forward_train takes it, with the samplers' choices recovered.
void put_step(nn::Checkpoint& out, int64_t step, models::FasterRCNN& model, nn::Optimizer& optimizer,
              const Tensor& images, const std::vector<Tensor>& boxes, const std::vector<Tensor>& labels,
              const data::Batch& batch, Generator& generator) {
  model.train();
  const std::string prefix = "step" + std::to_string(step) + ".";
  const std::vector<uint64_t> before = generator.state();
  const models::Losses losses = model.forward_train(images, boxes, labels, batch.image_sizes, &generator);
  optimizer.zero_grad();
  models::FasterRCNN::total_loss(losses).backward();
  for (const auto& [name, loss] : losses) out.put(prefix + "loss." + name, loss);
  for (const auto& [name, param] : model.named_parameters()) out.put(prefix + "grad." + name, param.grad());

  // Replay: the step's proposals and samples again, from the head's outputs recomputed under no_grad (the
  // same batch statistics, so the same bits). BatchNorm in training mode would move its running statistics
  // a second time: they are restored afterwards.
  NoGradGuard no_grad;
  const nn::NamedTensors buffers = model.named_buffers();
  std::vector<Tensor> saved;
  for (const auto& [name, buffer] : buffers) saved.push_back(buffer.clone());
  const Tensor features = (*model.backbone)(images);
  const models::RPNHeadOutput head = (*model.rpn->head)(features);
  for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second.copy_(saved[i]);
  const std::array<int64_t, 2> size{images.size(2), images.size(3)};
  const Tensor anchors = model.rpn->anchors(size, features);
  const models::RPNOptions& rpn = model.rpn->options();
  const models::PaddedProposals padded =
      models::rpn_proposals_padded(models::flatten_objectness(head.objectness), models::flatten_deltas(head.deltas),
                                   anchors, batch.image_sizes, rpn.train_proposals);
  Generator replay;
  replay.set_state(before);
  const models::RPNTargets targets = models::rpn_targets(anchors, boxes, rpn.loss);
  const models::SampledMasks masks = models::BalancedPositiveNegativeSampler(
      rpn.loss.batch_size_per_image, rpn.loss.positive_fraction)(targets.labels, &replay);
  out.put(prefix + "rpn_positive", masks.positive);
  out.put(prefix + "rpn_negative", masks.negative);
  const models::RoISample sample =
      models::sample_rois_padded(padded, boxes, labels, model.roi_heads->options(), &replay);
  MINIDET_CHECK(replay.state() == generator.state(), "parity_minidet: the replayed samplers drew ",
                "differently from the step (the step's sampling order changed?)");
  const std::vector<int64_t> counts = padded.counts.to(Device::cpu()).to_vector<int64_t>();
  const Tensor rois = sample.rois.to(Device::cpu()), valid = sample.valid.to(Device::cpu());
  const std::vector<uint8_t> keep = valid.to(kUInt8).to_vector<uint8_t>();
  const std::vector<double> image_of = rois.select(1, 0).to(kFloat64).contiguous().to_vector<double>();
  for (size_t n = 0; n < counts.size(); ++n) {
    const Tensor proposals = padded.boxes.select(0, static_cast<int64_t>(n)).narrow(0, 0, counts[n]);
    out.put(prefix + "proposals." + std::to_string(n), proposals);
    std::vector<int64_t> mine;
    for (size_t k = 0; k < keep.size(); ++k)
      if (keep[k] && static_cast<size_t>(image_of[k]) == n) mine.push_back(static_cast<int64_t>(k));
    const Tensor picked =
        index_select(rois.narrow(1, 1, 4), 0, from_vector<int64_t>(mine, {static_cast<int64_t>(mine.size())}));
    out.put(prefix + "roi_candidate." + std::to_string(n),
            candidate_rows(cat({proposals.to(Device::cpu()), boxes[n].to(Device::cpu())}, 0), picked));
  }
  optimizer.step();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"minidet's half of the torchvision parity check (bench/detector_parity.py)"};
  std::string out_path, weights, save_weights, dtype_name = "float64", device_name = "cpu";
  uint64_t seed = 0;
  int64_t steps = 1, image_size = 128;
  std::vector<std::string> sets;
  app.add_option("--out", out_path, "the dump file")->required();
  app.add_option("--weights", weights, "a minidet checkpoint to start from (else: initialised from --seed)");
  app.add_option("--seed", seed, "weight initialisation and samplers' seed")->capture_default_str();
  app.add_option("--save-weights", save_weights, "write the initial weights here (a minidet checkpoint)");
  app.add_option("--dtype", dtype_name, "float32 or float64")->capture_default_str();
  app.add_option("--device", device_name, "cpu or cuda")->capture_default_str();
  app.add_option("--steps", steps, "training steps to record")->capture_default_str();
  app.add_option("--set", sets, "detector config override, e.g. roi_heads.aligned=false");
  CLI11_PARSE(app, argc, argv);
  try {
    models::DetectorConfig config;
    for (const std::string& assignment : sets) config.set(assignment);
    Generator generator(seed);
    models::FasterRCNN model(config, &generator);
    if (!weights.empty()) nn::restore_training_state(nn::load_checkpoint(weights), model, nullptr, nullptr, nullptr);
    if (!save_weights.empty()) nn::save_checkpoint(save_weights, nn::capture_training_state(model, nullptr, nullptr, nullptr, {}));
    const DType dtype = dtype_name == "float32" ? kFloat32 : kFloat64;
    MINIDET_CHECK(dtype_name == "float32" || dtype_name == "float64", "--dtype must be float32 or float64");
    const Device device = Device::parse(device_name);
    model.to(dtype);
    model.to(device);

    const data::Batch batch = parity_batch(image_size);
    const Tensor images = batch.images.to(dtype).to(device);
    std::vector<Tensor> boxes, labels;
    nn::Checkpoint out;
    out.put("input.images", images);
    for (size_t n = 0; n < batch.boxes.size(); ++n) {
      boxes.push_back(batch.boxes[n].to(dtype).to(device));
      labels.push_back(batch.labels[n].to(device));
      out.put("input.boxes." + std::to_string(n), boxes.back());
      out.put("input.labels." + std::to_string(n), labels.back());
    }
    put_eval(out, model, batch, images);
    nn::Adam optimizer({{model.parameters(), 3e-3, 1e-4}}, nn::AdamOptions{0.9, 0.999, 1e-8, true});
    for (int64_t t = 0; t < steps; ++t) put_step(out, t, model, optimizer, images, boxes, labels, batch, generator);
    for (const auto& [name, param] : model.named_parameters()) out.put("final." + name, param);
    for (const auto& [name, buffer] : model.named_buffers()) out.put("final." + name, buffer);
    for (auto& [name, tensor] : out.entries) tensor = tensor.detach().to(Device::cpu()).contiguous();
    nn::save_checkpoint(out_path, out);
    std::printf("parity_minidet: %zu tensors -> %s\n", out.entries.size(), out_path.c_str());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "parity_minidet: %s\n", error.what());
    return 1;
  }
  return 0;
}
