// FasterRCNN: the whole two-stage detector as one Module (Ren et al. 2015; torchvision's FasterRCNN), built
// only from minidet's own blocks. For N images (N, 3, H, W) and C classes, one training step computes:
//
//   features  = backbone(images)                                     (N, F, H/s, W/s)   s = 8, F = 128 by default
//   proposals, rpn losses = rpn.forward_train(features, ...)         (N, P, 4) padded, with per-image counts, detached
//       loss_objectness   BCE on 256 sampled anchors per image           (models/rpn/rpn.h, rpn_loss.h)
//       loss_rpn_box_reg  smooth L1 (beta 1/9) on their positives
//   roi losses = roi_heads.forward_train(features, proposals, targets)
//       loss_classifier   cross-entropy over C + 1 classes on 128 sampled RoIs per image
//       loss_box_reg      smooth L1 on the positives' deltas of their own class   (models/roi_heads/roi_heads.h)
//   total = loss_objectness + loss_rpn_box_reg + loss_classifier + loss_box_reg    (total_loss)
//
// Gradients: the two RPN losses reach the RPN head and, through it, the backbone; the two RoI losses reach
// the box head, then RoIAlign's input gradient carries them into the same features (the proposals are
// detached, so nothing flows into the box coordinates), and on through the deformable last stage into its
// offset predictor. docs/detector.md follows one step with its shapes.
//
// The backbone and the RPN head are called as modules, (*backbone)(images) and (*head)(features), as PyTorch
// calls module(x), and the RoI heads' losses through RoIHeads::box_losses: their own code, unless the
// training engine installed a CUDA-graph replay of that same code (engine/cuda_graphs.h). Graph capture is
// the engine's concern; the model has one path.
//
// Rotated boxes (config.box_type = rotated): the same stages make an RRPN-style detector (Ma et al. 2018;
// detectron2's RRPN and RROIHeads): rotated anchors, five deltas per anchor and per class, rotated NMS,
// matching by rotated IoU, rotated RoIAlign in the box head. Boxes are then (cx, cy, w, h, angle) everywhere
// (targets (M_n, 5), detections (D, 5)); models/common/box_type.h lists each step's two forms, docs/rotated.md
// the convention.
//
// Inference (forward_infer): proposals with the RPN's test settings, then the box head, softmax, per-class
// decode, clip, score threshold, batched NMS and the best detections_per_image per image (Detections).
// It records no autograd graph. Which statistics BatchNorm uses follows the module's mode: call eval() first.
//
// Boundary checks (every entry point): images (N, in_channels, H, W) of the model's dtype and device;
// one boxes (M_n, 4) and labels (M_n) int64 tensor per image; every box finite with x1 < x2, y1 < y2 and
// inside its image up to box_tolerance pixels (rotated: (M_n, 5), w > 0, h > 0, the centre inside the
// image up to box_tolerance); every label in 1..C; image sizes within the padded size.
// Values are checked on the host: free when the targets are on the CPU (a data::Batch is checked before
// anything moves), one copy of all of them when they are on the GPU. An image with no objects (M_n = 0) is
// fine: its anchors and RoIs are all background.
//
// Host synchronisations of a CUDA training step (counted by core/transfer_counts.h, asserted by the
// cuda/faster_rcnn test): none with targets on the CPU (one for the target check above when they live on the
// GPU). The RPN hands its proposals on as one padded table with device-side counts
// (models/common/padded_proposals.h), and RoIAlign trusts the detector's own rois, so the host queues a
// whole step and the next one without waiting for the GPU. A data::Batch's targets reach the device in two
// copies (data::to_device). Inference hands on the same kind of table, so its only synchronisations are the
// three at its end, where the detections' number depends on the data (models/roi_heads/roi_heads.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "data/loader/loader.h"
#include "models/backbone/backbone.h"
#include "models/faster_rcnn/detector_config.h"
#include "models/roi_heads/roi_heads.h"
#include "models/rpn/rpn.h"
#include "nn/module/module.h"

namespace minidet::models {

using Losses = std::map<std::string, Tensor>;  // loss_objectness, loss_rpn_box_reg, loss_classifier, loss_box_reg

// What forward returns: losses in training mode, detections in eval mode (the other member stays empty).
struct DetectorOutput {
  Losses losses;
  std::vector<Detections> detections;
};

class FasterRCNN final : public nn::Module {
 public:
  // Validates the config, then builds every block on the CPU in float32; weights drawn from `generator`
  // (the default generator when null). Move it with to(device).
  explicit FasterRCNN(const DetectorConfig& config = {}, Generator* generator = nullptr);

  // images (N, C_in, H, W); boxes[n] (M_n, D) and labels[n] (M_n) int64 for image n, on any device (moved
  // to the images'). image_sizes: (height, width) of each image before padding; empty means (H, W) for all.
  // generator: the samplers' (the default generator when null). Returns the four losses (0-dim).
  Losses forward_train(const Tensor& images, const std::vector<Tensor>& boxes, const std::vector<Tensor>& labels,
                       const ImageSizes& image_sizes = {}, Generator* generator = nullptr);
  // A loader's batch (CPU, float32): checked on the host, then moved to the model's device and dtype
  // (data::to_device). A rotated detector trains on batch.rotated_boxes.
  Losses forward_train(const data::Batch& batch, Generator* generator = nullptr);

  std::vector<Detections> forward_infer(const Tensor& images, const ImageSizes& image_sizes = {});
  std::vector<Detections> forward_infer(const data::Batch& batch);

  // torchvision's forward(images, targets): losses when is_training(), detections otherwise.
  DetectorOutput forward(const data::Batch& batch, Generator* generator = nullptr);

  static Tensor total_loss(const Losses& losses);

  const DetectorConfig& config() const { return config_; }
  std::string extra_repr() const override;

  std::shared_ptr<Backbone> backbone;
  std::shared_ptr<RPN> rpn;
  std::shared_ptr<RoIHeads> roi_heads;

 private:
  TensorOptions parameter_options() const;  // the model's dtype and device
  // images' shape and the image sizes (the defaults filled in); checked_image_sizes adds the model's dtype
  // and device.
  ImageSizes checked_batch_shape(const char* op, const Tensor& images, const ImageSizes& image_sizes) const;
  ImageSizes checked_image_sizes(const char* op, const Tensor& images, const ImageSizes& image_sizes) const;
  // The training step itself, on checked inputs that share the images' device: the four losses.
  Losses train_losses(const Tensor& images, const std::vector<Tensor>& boxes, const std::vector<Tensor>& labels,
                      const ImageSizes& image_sizes, Generator* generator);

  DetectorConfig config_;  // resolved
};

}  // namespace minidet::models
