// walkthrough_detector: one training step of the tiny Faster R-CNN, stage by stage (docs/detector.md).
//
// One 128 x 128 image of the synthetic shapes goes through the default detector. The program calls the
// blocks in the order FasterRCNN::forward_train calls them and prints
//   1. the forward shapes: images, features (with the deformable stage's offsets), anchors, the RPN head's
//      outputs flattened to anchor order, the anchors' labels and the 256 sampled, the proposals, the
//      sampled RoIs, RoIAlign's pooled features, the class logits and deltas, the four losses; then the
//      total of model.forward_train with the same seed, which must be the same number;
//   2. the gradient of loss_box_reg alone: only the 4 delta columns of a positive row's class, only the
//      positive rows of the pooled features, the feature cells under them (RoIAlign's scatter), and the
//      deformable conv's offset predictor; never the proposals (detached);
//   3. the backward trace of the whole loss, filtered to the loss nodes, the box head's linear layers,
//      RoIAlign, the deformable conv and the offset predictor's leaves (--trace all prints every node), and
//      a count of every node that ran;
//   4. the gradient norm of each part, and the autograd graph as Graphviz DOT (--dot FILE);
//   5. with --html FILE, the backward explorer's page of step 3's backward (autograd/backward_html.h): play
//      it node by node in a browser; with --record FILE, the record behind it as JSON (what a build without
//      Graphviz can still write; `minidet explain --from-record FILE` makes the page elsewhere).
//
//   walkthrough_detector [--device cpu|cuda] [--seed 0] [--image-index 0] [--dot detector_graph.dot]
//                        [--trace filtered|all|none] [--offset-noise 0] [--html step.html] [--record step.json]
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/backward_html.h"
#include "autograd/backward_record.h"
#include "autograd/dot.h"
#include "autograd/engine.h"
#include "autograd/scope.h"
#include "autograd/trace.h"
#include "core/cuda/availability.h"
#include "core/factories.h"
#include "core/generator.h"
#include "core/grad_mode.h"
#include "core/transfer_counts.h"
#include "data/loader/loader.h"
#include "data/shapes/shapes_dataset.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "models/rpn/rpn_head.h"
#include "models/rpn/rpn_loss.h"
#include "models/sampler/sampler.h"
#include "nn/layers/deform_conv2d.h"
#include "nn/layers/sequential.h"
#include "ops/boxes/box_iou.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/reduction/reduction.h"
#include "ops/roi_align/roi_align.h"

using namespace minidet;

namespace {

std::string shape(const Tensor& t) {
  std::string s = "(";
  for (int64_t d = 0; d < t.dim(); ++d) s += std::to_string(t.size(d)) + (d + 1 < t.dim() ? ", " : "");
  return s + ")";
}

void row(const std::string& what, const Tensor& t, const std::string& note = "") {
  std::printf("  %-44s %-18s %s\n", what.c_str(), shape(t).c_str(), note.c_str());
}

std::string box_text(const double* b) {
  char s[80];
  std::snprintf(s, sizeof s, "(%5.1f, %5.1f, %5.1f, %5.1f)", b[0], b[1], b[2], b[3]);
  return s;
}

int64_t count_true(const Tensor& mask) {
  int64_t count = 0;
  for (bool b : mask.to_vector<bool>()) count += b;
  return count;
}

int64_t count_nonzero_rows(const Tensor& t) {  // rows of a (K, ...) tensor with any non-zero entry
  const std::vector<double> v = t.to_vector<double>();
  const int64_t rows = t.size(0), width = rows ? t.numel() / rows : 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j)
      if (v[r * width + j] != 0.0) { ++count; break; }
  return count;
}

double grad_norm(const Tensor& t) { return t.grad().defined() ? autograd::l2_norm(t.grad()) : 0.0; }

// The squared-norm sum over the parameters whose dotted name contains `part`, and how many elements.
std::pair<double, int64_t> part_norm(const nn::Module& model, const std::string& part) {
  double squares = 0.0;
  int64_t elements = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    if (name.find(part) == std::string::npos) continue;
    elements += p.numel();
    squares += std::pow(grad_norm(p), 2);
  }
  return {std::sqrt(squares), elements};
}

// The trace prints one block per node: "[backward i] name ..." and then indented gradient lines. Keep the
// blocks of the nodes a reader wants to see, and count every node by name.
void print_filtered_trace(const std::string& trace, bool everything) {
  const std::set<std::string> shown = {"roi_align", "deform_conv2d", "linear", "binary_cross_entropy_with_logits",
                                       "smooth_l1_loss", "log_softmax"};
  std::map<std::string, int> counts;
  std::istringstream in(trace);
  std::string line;
  bool keep = false;
  int nodes = 0;
  while (std::getline(in, line)) {
    if (line.rfind("[backward ", 0) == 0) {
      ++nodes;
      const size_t start = line.find("] ") + 2;
      const std::string name = line.substr(start, line.find(' ', start) - start);
      ++counts[name];
      keep = everything || shown.count(name) ||
             (name == "AccumulateGrad" && line.find("offset_conv") != std::string::npos);
    }
    if (keep) std::printf("  %s\n", line.c_str());
  }
  std::printf("\n  %d nodes ran; by op:", nodes);
  int column = 0;
  for (const auto& [name, count] : counts) std::printf("%s%s x%d", column++ % 6 ? ",  " : "\n    ", name.c_str(), count);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One training step of the tiny Faster R-CNN: shapes, losses, where the gradients go"};
  std::string device_name = "cpu", dot_path = "detector_graph.dot", trace_mode = "filtered", html_path, record_path;
  uint64_t seed = 0;
  int64_t image_index = 0;
  double offset_noise = 0.0;
  app.add_option("--device", device_name, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--seed", seed, "seed of the weights and of the samplers");
  app.add_option("--image-index", image_index, "which training image of the synthetic shapes");
  app.add_option("--dot", dot_path, "where to write the autograd graph (Graphviz DOT)");
  app.add_option("--trace", trace_mode, "backward trace: filtered, all or none")
      ->check(CLI::IsMember({"filtered", "all", "none"}));
  app.add_option("--offset-noise", offset_noise,
                 "give the offset predictor N(0, s^2) weights, so the deformable conv samples off the grid");
  app.add_option("--html", html_path, "write the backward explorer's page of the whole loss's backward here");
  app.add_option("--record", record_path, "write the backward record (JSON) of the whole loss's backward here");
  CLI11_PARSE(app, argc, argv);

  try {
    if (!html_path.empty() && !autograd::backward_html_available())
      throw std::runtime_error("--html needs a build with Graphviz (libgraphviz-dev); --record FILE still works");
    // Every node made from here on remembers the module that made it, for the explorer's groups.
    std::optional<autograd::ScopeRecordingGuard> scopes;
    if (!html_path.empty() || !record_path.empty()) scopes.emplace();
    if (device_name == "cuda" && !cuda::is_available()) {
      std::fprintf(stderr, "walkthrough_detector: no CUDA device available\n");
      return 1;
    }
    const Device device = device_name == "cuda" ? Device::cuda() : Device::cpu();
    const TensorOptions options(kFloat32, device);

    // The model: every number from DetectorConfig's defaults (models/faster_rcnn/detector_config.h).
    Generator init(seed);
    models::FasterRCNN model(models::DetectorConfig{}, &init);
    const auto deformable = std::dynamic_pointer_cast<nn::DeformConv2d>(
        std::dynamic_pointer_cast<models::BasicBlock>((*model.backbone->stages.back())[0])->conv1);
    if (!deformable) throw std::runtime_error("expected a deformable last stage (the default config)");
    if (offset_noise > 0.0) {  // the gradcheck does the same, to keep samples away from the bilinear kinks
      NoGradGuard no_grad;
      for (const auto& [name, p] : deformable->offset_conv->named_parameters())
        p.copy_(mul(randn(p.sizes(), p.options(), &init), offset_noise));
    }
    model.to(device);
    for (const auto& [name, p] : model.named_parameters()) autograd::set_name(p, name);
    std::printf("FasterRCNN: %lld parameters (backbone %lld, rpn %lld, roi_heads %lld), on %s\n\n",
                static_cast<long long>(model.num_parameters()),
                static_cast<long long>(model.backbone->num_parameters()),
                static_cast<long long>(model.rpn->num_parameters()),
                static_cast<long long>(model.roi_heads->num_parameters()), device_name.c_str());

    // One image of the synthetic shapes, 128 px, as a loader would batch it.
    data::ShapesOptions shapes;
    shapes.image_width = shapes.image_height = 128;
    const data::ShapesDataset dataset(data::Split::kTrain, shapes);
    const data::Batch batch = data::collate({dataset.get(image_index)}, {image_index});
    const Tensor images = batch.images.to(options);
    const std::vector<Tensor> boxes = {batch.boxes[0].to(options)}, labels = {batch.labels[0].to(device)};
    const std::array<int64_t, 2> image_size = {images.size(2), images.size(3)};
    const std::vector<double> gt = batch.boxes[0].to_vector<double>();
    const std::vector<int64_t> gt_labels = batch.labels[0].to_vector<int64_t>();

    std::printf("1. Forward, in FasterRCNN::forward_train's order (N = 1 image here; docs/detector.md: N = 8)\n");
    row("images (N, 3, H, W)", images);
    for (size_t m = 0; m < gt_labels.size(); ++m)
      std::printf("    object %zu: class %lld (%s) box %s\n", m, static_cast<long long>(gt_labels[m]),
                  dataset.class_names()[gt_labels[m] - 1].c_str(), box_text(&gt[4 * m]).c_str());

    // The step's own generator: the RPN's sampler draws from it first, then the RoI sampler.
    Generator step_gen(seed);
    const Tensor features = (*model.backbone)(images);
    autograd::retain_grad(features);
    {  // a look inside the backbone (not part of the step's graph)
      NoGradGuard no_grad;
      Tensor x = model.backbone->stem->forward(images);
      row("backbone stem: conv 3x3 /2, norm, relu", x);
      for (size_t i = 0; i < model.backbone->stages.size(); ++i) {
        if (i + 1 == model.backbone->stages.size()) {
          const Tensor offsets = deformable->offset_conv->forward(x);
          char note[96];
          std::snprintf(note, sizeof note, "max |offset| %.4g%s", max(abs(offsets)).item<double>(),
                        offset_noise > 0.0 ? "" : " (zero-initialised: a plain conv)");
          row("  stage " + std::to_string(i + 1) + " offsets (N, 2*3*3, h, w)", offsets, note);
        }
        x = model.backbone->stages[i]->forward(x);
        row("backbone stage " + std::to_string(i + 1) + (i + 1 == model.backbone->stages.size() ? " (deformable)" : ""), x);
      }
    }
    row("features (N, F, H/8, W/8)", features);

    const models::RPNTrainOutput rpn =
        model.rpn->forward_train(features, image_size, batch.image_sizes, boxes, &step_gen);
    {  // what rpn->forward_train did inside, recomputed without a graph
      NoGradGuard no_grad;
      const Tensor anchors = model.rpn->anchors(image_size, features);
      const models::RPNHeadOutput head = (*model.rpn->head)(features);
      const Tensor objectness = models::flatten_objectness(head.objectness);
      const Tensor deltas = models::flatten_deltas(head.deltas);
      row("anchors (K = h*w*A, 4)", anchors, "A = 9: sizes {16,32,64} x ratios {0.5,1,2}");
      const std::vector<double> a = anchors.to_vector<double>();
      for (int64_t i = 0; i < 9; i += 4) std::printf("    anchor %lld of cell (0, 0): %s\n", static_cast<long long>(i), box_text(&a[4 * i]).c_str());
      row("rpn objectness (N, A, h, w)", head.objectness);
      row("rpn deltas (N, 4A, h, w)", head.deltas);
      row("  flattened to anchor order (N, K)", objectness);
      row("  flattened to anchor order (N, K, 4)", deltas);
      const models::RPNTargets targets = models::rpn_targets(anchors, boxes, model.config().rpn.loss);
      int64_t pos = 0, neg = 0, ignored = 0;
      for (int64_t l : targets.labels.to_vector<int64_t>()) (l == 1 ? pos : l == 0 ? neg : ignored) += 1;
      std::printf("    anchor labels (IoU >= 0.7 or best for an object / < 0.3 / between): %lld object, %lld "
                  "background, %lld ignored\n", static_cast<long long>(pos), static_cast<long long>(neg),
                  static_cast<long long>(ignored));
      const models::RPNLossOptions& lo = model.config().rpn.loss;
      const models::BalancedPositiveNegativeSampler sampler(lo.batch_size_per_image, lo.positive_fraction);
      Generator peek(seed);  // the step's generator starts like this, and the RPN's sampler draws first
      const models::SampledMasks s = sampler(targets.labels, &peek);
      const int64_t sampled_pos = count_true(s.positive), sampled_neg = count_true(s.negative);
      std::printf("    sampled: %lld positives (quota %lld) + %lld negatives = S = %lld anchors\n",
                  static_cast<long long>(sampled_pos), static_cast<long long>(sampler.positive_quota()),
                  static_cast<long long>(sampled_neg), static_cast<long long>(sampled_pos + sampled_neg));
      Generator again(seed);
      const models::RPNLosses check = models::rpn_loss(objectness, deltas, anchors, boxes, &again, lo);
      std::printf("    (recomputed with that draw: loss_objectness %.6f, the step's %.6f)\n",
                  check.objectness.item<double>(), rpn.losses.objectness.item<double>());
    }
    // The proposals stay one padded table with the counts on the device (no step of training reads them on
    // the host); the walkthrough reads image 0's count to show its rows.
    row("proposal table (N, P, 4)", rpn.proposals.boxes, "P = 300: image n's proposals are its first counts[n] rows");
    const int64_t count = rpn.proposals.counts.to(Device::cpu()).to_vector<int64_t>()[0];
    const Tensor proposals = rpn.proposals.boxes.select(0, 0).narrow(0, 0, count);
    row("proposals of image 0 (counts[0], 4)", proposals,
        std::string("<= 300 after NMS 0.7; requires_grad = ") + (proposals.requires_grad() ? "true" : "false"));
    if (proposals.size(0) > 0 && !gt_labels.empty()) {
      const std::vector<double> best = max(box_iou(boxes[0], proposals), 1).values.to_vector<double>();
      for (size_t m = 0; m < best.size(); ++m) std::printf("    object %zu: best proposal IoU %.3f\n", m, best[m]);
    }

    // The RoI heads, as RoIHeads::forward_train: sample, then forward_box_head's two steps (split here so
    // the pooled features can be shown), then the losses.
    const models::RoIHeadsOptions& ro = model.roi_heads->options();
    const models::RoISample sample = models::sample_rois_padded(rpn.proposals, boxes, labels, ro, &step_gen);
    const std::vector<int64_t> roi_labels = sample.labels.to_vector<int64_t>();
    const std::vector<bool> valid = sample.valid.to_vector<bool>();
    int64_t positives = 0, sampled = 0;
    for (size_t k = 0; k < valid.size(); ++k) {
      sampled += valid[k];
      positives += valid[k] && roi_labels[k] >= 1;
    }
    row("sampled rois (K, 5): (image, x1, y1, x2, y2)", sample.rois,
        "K = min(" + std::to_string(ro.batch_size_per_image) + ", P + M) per image; " + std::to_string(sampled) +
            " sampled, " + std::to_string(positives) + " positive (quota " +
            std::to_string(models::BalancedPositiveNegativeSampler(ro.batch_size_per_image, ro.positive_fraction)
                               .positive_quota()) + ")");
    const std::vector<double> rois = sample.rois.to_vector<double>(), targets = sample.regression_targets.to_vector<double>();
    for (size_t k = 0, shown = 0; k < valid.size() && shown < 3; ++k) {
      if (!valid[k] || roi_labels[k] < 1) continue;
      ++shown;
      std::printf("    positive row %zu: roi %s class %lld target (%.3f, %.3f, %.3f, %.3f)\n", k,
                  box_text(&rois[5 * k + 1]).c_str(), static_cast<long long>(roi_labels[k]), targets[4 * k],
                  targets[4 * k + 1], targets[4 * k + 2], targets[4 * k + 3]);
    }
    const RoIAlignOptions align = RoIAlignOptions()
                                      .set_output_size(ro.pooled_size)
                                      .set_spatial_scale(1.0 / static_cast<double>(ro.feature_stride))
                                      .set_sampling_ratio(ro.sampling_ratio)
                                      .set_aligned(ro.aligned);
    const Tensor pooled = roi_align(features, sample.rois, align);
    autograd::retain_grad(pooled);
    row("roi_align 7x7, scale 1/8, sampling 2, aligned", pooled, "(K, F, 7, 7)");
    const models::BoxHeadOutput head = model.roi_heads->box_head->forward(pooled);
    autograd::retain_grad(head.box_deltas);
    row("fc6 weight (R, F*7*7)", model.roi_heads->box_head->fc6->weight);
    row("class logits (K, C + 1)", head.class_logits);
    row("box deltas (K, 4 (C + 1))", head.box_deltas);

    models::Losses losses = models::roi_heads_loss(head, sample, ro.smooth_l1_beta);
    losses["loss_objectness"] = rpn.losses.objectness;
    losses["loss_rpn_box_reg"] = rpn.losses.box;
    for (const auto& [name, loss] : losses) autograd::set_name(loss, name);  // the explorer finds them by name
    const Tensor total = models::FasterRCNN::total_loss(losses);
    autograd::set_name(total, "total loss");
    std::printf("\n  loss_objectness  %.6f   BCE on the S sampled anchors, / S\n"
                "  loss_rpn_box_reg %.6f   smooth L1 (beta 1/9) on the sampled positives, / S\n"
                "  loss_classifier  %.6f   cross-entropy over C + 1 = 4 classes, mean over the sampled rois\n"
                "  loss_box_reg     %.6f   smooth L1 (beta 1/9) on positive rows' own-class deltas, / sampled rois\n"
                "  total            %.6f\n",
                losses.at("loss_objectness").item<double>(), losses.at("loss_rpn_box_reg").item<double>(),
                losses.at("loss_classifier").item<double>(), losses.at("loss_box_reg").item<double>(),
                total.item<double>());
    {
      NoGradGuard no_grad;  // the same step as one call (BatchNorm uses batch statistics: the same numbers)
      Generator same(seed);
      const TransferCounts before = transfer_counts();
      // The loader's batch as the training loop hands it over: checked on the host, then moved.
      const double whole = models::FasterRCNN::total_loss(model.forward_train(batch, &same)).item<double>();
      const TransferCounts copies = transfer_counts() - before;
      std::printf("  model.forward_train with the same seed: total %.6f -> %s\n", whole,
                  std::fabs(whole - total.item<double>()) <= 1e-6 * std::fabs(whole) ? "the same" : "DIFFERENT");
      if (device.is_cuda())
        std::printf("  its copies (forward only, from the loader's CPU batch): %lld device-to-host, %lld "
                    "host-to-device (the final .item() included)\n", static_cast<long long>(copies.device_to_host),
                    static_cast<long long>(copies.host_to_device));
    }
    std::ofstream(dot_path) << autograd::to_dot({total});

    // 2. loss_box_reg alone, keeping the graph for the full backward below.
    std::printf("\n2. Where loss_box_reg's gradient goes\n");
    losses.at("loss_box_reg").backward(Tensor(), /*retain_graph=*/true);
    const std::vector<double> grad_deltas =
        head.box_deltas.grad().defined() ? head.box_deltas.grad().to_vector<double>() : std::vector<double>();
    const int64_t columns = head.box_deltas.size(1);
    for (size_t k = 0, shown = 0; k < valid.size() && shown < 3; ++k) {
      if (!valid[k] || roi_labels[k] < 1) continue;
      ++shown;
      std::printf("  positive row %zu (class %lld): dL/ddeltas non-zero in columns", k, static_cast<long long>(roi_labels[k]));
      for (int64_t j = 0; j < columns; ++j)
        if (grad_deltas[columns * k + j] != 0.0) std::printf(" %lld", static_cast<long long>(j));
      std::printf("\n");
    }
    std::printf("  dL/dpooled: %lld of %lld rows non-zero (the positives; fc7, fc6 and their relus pass it back)\n",
                static_cast<long long>(pooled.grad().defined() ? count_nonzero_rows(pooled.grad()) : 0),
                static_cast<long long>(pooled.size(0)));
    const Tensor cells = features.grad().defined() ? sum(abs(features.grad()), {1}).reshape({-1, 1}) : zeros({0, 1});  // (h*w, 1): any channel non-zero
    std::printf("  dL/dfeatures: %lld of %lld cells non-zero (RoIAlign: each sample's four neighbours, with its "
                "bilinear weights), norm %.4g\n", static_cast<long long>(count_nonzero_rows(cells)),
                static_cast<long long>(cells.size(0)), grad_norm(features));
    std::printf("  dL/d offset_conv.weight: norm %.4g (deform_conv2d's offset gradient, through dS/dy and dS/dx)\n",
                grad_norm(deformable->offset_conv->weight));
    std::printf("  proposals: requires_grad %s, rois: requires_grad %s -> nothing flows into the boxes\n",
                proposals.requires_grad() ? "true" : "false", sample.rois.requires_grad() ? "true" : "false");
    model.zero_grad();
    autograd::zero_grad(features);
    autograd::zero_grad(pooled);
    autograd::zero_grad(head.box_deltas);

    // 3. The whole loss, traced.
    std::printf("\n3. Backward of the total loss%s\n",
                trace_mode == "filtered" ? ": trace of the loss, linear, roi_align and deform_conv2d nodes and the "
                                           "offset predictor's leaves (--trace all: every node)" : "");
    std::optional<autograd::BackwardRecorder> recorder;
    if (!html_path.empty() || !record_path.empty()) {
      autograd::RecordOptions record_options;
      record_options.title = "walkthrough_detector: one training step of the tiny Faster R-CNN on " + device_name;
      recorder.emplace(record_options);
    }
    if (trace_mode == "none") {
      total.backward();
    } else {
      std::ostringstream trace;
      {
        autograd::BackwardTraceGuard guard(trace);
        total.backward();
      }
      print_filtered_trace(trace.str(), trace_mode == "all");
    }

    // 4. Gradient norms per part.
    std::printf("\n4. Gradient norms per part\n");
    const std::vector<std::pair<std::string, std::string>> parts = {
        {"backbone stem", "backbone.stem."},
        {"backbone (all)", "backbone."},
        {"deformable conv weight", "stage" + std::to_string(model.backbone->stages.size()) + ".0.conv1.weight"},
        {"deformable offset predictor", "offset_conv."},
        {"rpn head", "rpn.head."},
        {"box head", "roi_heads.box_head."}};
    for (const auto& [label, part] : parts) {
      const auto [norm, elements] = part_norm(model, part);
      std::printf("  %-30s %9lld elements   |grad| %.4g\n", label.c_str(), static_cast<long long>(elements), norm);
    }
    std::printf("\nautograd graph of the step written to %s (dot -Tsvg %s -o detector_graph.svg)\n", dot_path.c_str(),
                dot_path.c_str());
    if (recorder) {
      const autograd::BackwardRecord record = recorder->take();
      if (!record_path.empty()) {
        std::ofstream(record_path) << record.to_json();
        std::printf("backward record (%zu nodes) written to %s\n", record.nodes.size(), record_path.c_str());
      }
      if (!html_path.empty()) {
        autograd::write_backward_html(record, html_path);
        std::printf("backward explorer written to %s: open it in a browser and press 'next'\n", html_path.c_str());
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "walkthrough_detector: %s\n", e.what());
    return 1;
  }
}
