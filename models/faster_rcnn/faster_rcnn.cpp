// FasterRCNN: the blocks strung together, and the checks at the detector's boundary (see faster_rcnn.h).
#include "models/faster_rcnn/faster_rcnn.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "core/factories.h"
#include "data/loader/loader.h"
#include "ops/common/checks.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"

namespace minidet::models {

namespace {

// Shapes and dtypes of one boxes and one labels tensor per image (no values: see check_target_values).
void check_target_shapes(const char* op, BoxType type, int64_t images, const std::vector<Tensor>& boxes,
                         const std::vector<Tensor>& labels) {
  const int64_t d = box_dim(type);
  MINIDET_CHECK(static_cast<int64_t>(boxes.size()) == images && static_cast<int64_t>(labels.size()) == images, op,
                ": expected one boxes and one labels tensor per image (", images, "), got ", boxes.size(), " and ",
                labels.size());
  for (int64_t n = 0; n < images; ++n) {
    const Tensor &b = boxes[n], &l = labels[n];
    MINIDET_CHECK(b.defined() && l.defined(), op, ": boxes[", n, "] or labels[", n, "] is undefined");
    MINIDET_CHECK(b.dim() == 2 && b.size(1) == d, op, ": expected boxes[", n, "] of shape (M, ", d, ") ",
                  box_layout(type), ", got ", b.sizes());
    MINIDET_CHECK(is_floating(b.dtype()), op, ": expected floating boxes[", n, "], got ", b.dtype());
    MINIDET_CHECK(l.dim() == 1 && l.size(0) == b.size(0), op, ": expected labels[", n, "] of shape (", b.size(0),
                  ") (one per box), got ", l.sizes());
    MINIDET_CHECK(l.dtype() == kInt64, op, ": expected int64 labels[", n, "], got ", l.dtype());
  }
}

// Every box finite, x1 < x2, y1 < y2, inside its image up to `tolerance` (rotated: w > 0, h > 0, the centre
// inside the image up to `tolerance`; a turned box may reach past the border, as an object cut by it does);
// every label in 1..C. All values are read into one host table (sum M, D + 1) = [boxes, label]: in place when
// they are on the CPU (a loader's batch), in a single copy when they live on the GPU.
std::vector<double> target_table(const std::vector<Tensor>& boxes, const std::vector<Tensor>& labels, int64_t d) {
  NoGradGuard no_grad;
  const auto on_gpu = [](const Tensor& t) { return t.is_cuda(); };
  const bool on_host =
      std::none_of(boxes.begin(), boxes.end(), on_gpu) && std::none_of(labels.begin(), labels.end(), on_gpu);
  if (!on_host) {
    std::vector<Tensor> rows;
    for (size_t n = 0; n < boxes.size(); ++n)
      rows.push_back(
          cat({boxes[n].detach().to(kFloat64), labels[n].to(boxes[n].device()).to(kFloat64).unsqueeze(1)}, 1));
    return cat(rows, 0).to(Device::cpu()).to_vector<double>();
  }
  std::vector<double> table;
  for (size_t n = 0; n < boxes.size(); ++n) {
    const std::vector<double> b = boxes[n].to_vector<double>();
    const std::vector<int64_t> l = labels[n].to_vector<int64_t>();
    for (size_t m = 0; m < l.size(); ++m) {
      table.insert(table.end(), b.begin() + static_cast<int64_t>(m) * d, b.begin() + static_cast<int64_t>(m + 1) * d);
      table.push_back(static_cast<double>(l[m]));
    }
  }
  return table;
}

void check_target_values(const char* op, BoxType type, const std::vector<Tensor>& boxes,
                         const std::vector<Tensor>& labels, const ImageSizes& sizes, int64_t num_classes,
                         double tolerance) {
  const int64_t d = box_dim(type);
  const std::vector<double> host = target_table(boxes, labels, d);
  if (host.empty()) return;
  size_t row = 0;
  for (size_t n = 0; n < boxes.size(); ++n) {
    const double height = static_cast<double>(sizes[n][0]), width = static_cast<double>(sizes[n][1]);
    for (int64_t m = 0; m < boxes[n].size(0); ++m, ++row) {
      const double* v = &host[(d + 1) * row];
      const auto box = [&] {  // for a message only: formatting every box would cost more than the checks
        std::ostringstream text;
        text << "box " << m << " of image " << n << " (";
        for (int64_t j = 0; j < d; ++j) text << (j ? ", " : "") << v[j];
        text << ")";
        return text.str();
      };
      MINIDET_CHECK(std::all_of(v, v + d, [](double x) { return std::isfinite(x); }), op, ": ", box(),
                    " is not finite");
      if (type == BoxType::kRotated) {
        MINIDET_CHECK(v[2] > 0 && v[3] > 0, op, ": ", box(), " is empty: expected w > 0 and h > 0");
        MINIDET_CHECK(
            v[0] >= -tolerance && v[1] >= -tolerance && v[0] <= width + tolerance && v[1] <= height + tolerance, op,
            ": ", box(), " has its centre outside the image of ", sizes[n][0], " x ", sizes[n][1],
            " (height x width) by more than box_tolerance = ", tolerance, " px");
      } else {
        MINIDET_CHECK(v[0] < v[2] && v[1] < v[3], op, ": ", box(),
                      " is empty or inverted: expected x1 < x2 and y1 < y2");
        MINIDET_CHECK(
            v[0] >= -tolerance && v[1] >= -tolerance && v[2] <= width + tolerance && v[3] <= height + tolerance, op,
            ": ", box(), " lies outside the image of ", sizes[n][0], " x ", sizes[n][1],
            " (height x width) by more than box_tolerance = ", tolerance, " px");
      }
      const double label = v[d];
      MINIDET_CHECK(label >= 1 && label <= static_cast<double>(num_classes), op, ": label ", m, " of image ", n,
                    " is ", static_cast<int64_t>(label), ", expected a class in 1..", num_classes,
                    " (0 is the background and never a target)");
    }
  }
}

}  // namespace

FasterRCNN::FasterRCNN(const DetectorConfig& config, Generator* generator)
    : Module("FasterRCNN"), config_(config.resolved()) {
  config.validate();
  Generator& gen = generator ? *generator : default_generator();
  BackboneOptions backbone_options = config_.backbone;
  backbone_options.generator = &gen;
  RPNOptions rpn_options = config_.rpn;
  rpn_options.generator = &gen;
  RoIHeadsOptions roi_options = config_.roi_heads;
  roi_options.generator = &gen;
  roi_options.check_targets = false;  // checked once, here, with the image bounds too
  // The RPN's proposal table holds boxes clipped to the image whose sides are >= min_size (a test NaN fails),
  // then zero boxes (models/rpn/rpn_proposals.cpp): every row is finite, and the image indices are the
  // sampler's own. No check needed, no sync.
  roi_options.check_proposal_values = false;
  backbone = register_module("backbone", std::make_shared<Backbone>(backbone_options));
  rpn = register_module("rpn", std::make_shared<RPN>(rpn_options));
  roi_heads = register_module("roi_heads", std::make_shared<RoIHeads>(roi_options));
}

TensorOptions FasterRCNN::parameter_options() const {
  const std::vector<Tensor> params = parameters();
  return params.empty() ? TensorOptions() : params.front().options();
}

ImageSizes FasterRCNN::checked_batch_shape(const char* op, const Tensor& images, const ImageSizes& image_sizes) const {
  ops::check_defined(op, images, "images");
  const int64_t channels = config_.backbone.in_channels;
  MINIDET_CHECK(images.dim() == 4 && images.size(1) == channels, op, ": expected images of shape (N, ", channels,
                ", H, W), got ", images.sizes());
  const int64_t n = images.size(0), height = images.size(2), width = images.size(3);
  MINIDET_CHECK(n > 0 && height > 0 && width > 0, op, ": expected at least one non-empty image, got ",
                images.sizes());
  if (image_sizes.empty()) return ImageSizes(static_cast<size_t>(n), {height, width});
  MINIDET_CHECK(static_cast<int64_t>(image_sizes.size()) == n, op, ": expected one image size per image (", n,
                "), got ", image_sizes.size());
  for (int64_t i = 0; i < n; ++i) {
    const auto& s = image_sizes[i];
    MINIDET_CHECK(s[0] > 0 && s[1] > 0 && s[0] <= height && s[1] <= width, op, ": image ", i, " has size (",
                  s[0], ", ", s[1], "), expected between (1, 1) and the padded batch size (", height, ", ", width,
                  ")");
  }
  return image_sizes;
}

ImageSizes FasterRCNN::checked_image_sizes(const char* op, const Tensor& images, const ImageSizes& image_sizes) const {
  const ImageSizes sizes = checked_batch_shape(op, images, image_sizes);
  const TensorOptions model = parameter_options();
  MINIDET_CHECK(images.dtype() == model.dtype && images.device() == model.device, op,
                ": images are ", images.dtype(), " on ", images.device(), " but the model is ", model.dtype, " on ",
                model.device, " (move one with to())");
  return sizes;
}

Losses FasterRCNN::forward_train(const Tensor& images, const std::vector<Tensor>& boxes_in,
                                 const std::vector<Tensor>& labels_in, const ImageSizes& image_sizes,
                                 Generator* generator) {
  const char* op = "FasterRCNN::forward_train";
  const ImageSizes sizes = checked_image_sizes(op, images, image_sizes);
  check_target_shapes(op, config_.box_type, images.size(0), boxes_in, labels_in);
  check_target_values(op, config_.box_type, boxes_in, labels_in, sizes, config_.num_classes, config_.box_tolerance);
  std::vector<Tensor> boxes, labels;
  for (size_t n = 0; n < boxes_in.size(); ++n) {
    boxes.push_back(boxes_in[n].detach().to(images.options()));
    labels.push_back(labels_in[n].to(images.device()));
  }
  return train_losses(images, boxes, labels, sizes, generator);
}

Losses FasterRCNN::forward_train(const data::Batch& batch, Generator* generator) {
  const char* op = "FasterRCNN::forward_train";
  // Every check before anything moves: the targets' values are read where the loader made them, on the
  // host, so a CUDA step never waits for the GPU to hand them back.
  // A rotated detector's targets are the batch's rotated boxes (data::Batch::rotated_boxes), which
  // to_device then moves into the place of the axis-aligned ones.
  const bool rotated = config_.box_type == BoxType::kRotated;
  const std::vector<Tensor>& boxes = rotated ? batch.rotated_boxes : batch.boxes;
  const ImageSizes sizes = checked_batch_shape(op, batch.images, batch.image_sizes);
  check_target_shapes(op, config_.box_type, batch.images.size(0), boxes, batch.labels);
  check_target_values(op, config_.box_type, boxes, batch.labels, sizes, config_.num_classes, config_.box_tolerance);
  const data::Batch moved = data::to_device(batch, parameter_options(),
                                            rotated ? data::TargetBoxes::kRotated : data::TargetBoxes::kAxisAligned);
  return train_losses(moved.images, moved.boxes, moved.labels, sizes, generator);
}

// The step of Ren et al. 2015 (torchvision's GeneralizedRCNN.forward in training): shared features, the RPN's
// losses and proposals, the RoI heads' losses on those proposals; the samplers of both stages draw from one
// generator, the RPN's first.
Losses FasterRCNN::train_losses(const Tensor& images, const std::vector<Tensor>& boxes,
                                const std::vector<Tensor>& labels, const ImageSizes& image_sizes,
                                Generator* generator) {
  Generator& gen = generator ? *generator : default_generator();
  const Tensor features = (*backbone)(images);
  const RPNTrainOutput rpn_out =
      rpn->forward_train(features, {images.size(2), images.size(3)}, image_sizes, boxes, &gen);
  Losses losses = roi_heads->forward_train(features, rpn_out.proposals, boxes, labels, &gen);
  losses["loss_objectness"] = rpn_out.losses.objectness;
  losses["loss_rpn_box_reg"] = rpn_out.losses.box;
  return losses;
}

std::vector<Detections> FasterRCNN::forward_infer(const Tensor& images, const ImageSizes& image_sizes) {
  const ImageSizes sizes = checked_image_sizes("FasterRCNN::forward_infer", images, image_sizes);
  NoGradGuard no_grad;
  const Tensor features = (*backbone)(images);
  const PaddedProposals proposals = rpn->forward_infer(features, {images.size(2), images.size(3)}, sizes);
  return roi_heads->forward_infer(features, proposals, sizes);
}

std::vector<Detections> FasterRCNN::forward_infer(const data::Batch& batch) {
  return forward_infer(batch.images.to(parameter_options()), batch.image_sizes);
}

DetectorOutput FasterRCNN::forward(const data::Batch& batch, Generator* generator) {
  DetectorOutput out;
  if (is_training())
    out.losses = forward_train(batch, generator);
  else
    out.detections = forward_infer(batch);
  return out;
}

Tensor FasterRCNN::total_loss(const Losses& losses) {
  MINIDET_CHECK(!losses.empty(), "FasterRCNN::total_loss: no losses given");
  Tensor total;
  for (const auto& [name, loss] : losses) total = total.defined() ? add(total, loss) : loss;
  return total;
}

std::string FasterRCNN::extra_repr() const {
  std::ostringstream out;
  out << "classes=" << config_.num_classes << ", stride=" << config_.rpn.feature_stride;
  if (config_.box_type == BoxType::kRotated) out << ", boxes=rotated";
  return out.str();
}

}  // namespace minidet::models
