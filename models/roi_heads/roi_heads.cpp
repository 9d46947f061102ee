// RoIHeads: the module that strings the steps of roi_heads.h together.
#include "models/roi_heads/roi_heads.h"

#include <utility>

#include "core/error.h"
#include "core/factories.h"
#include "models/roi_heads/roi_inputs.h"
#include "ops/common/checks.h"
#include "ops/roi_align/roi_align.h"
#include "ops/roi_align_rotated/roi_align_rotated.h"
#include "ops/shape/shape.h"

namespace minidet::models {

RoIHeads::RoIHeads(RoIHeadsOptions options) : Module("RoIHeads"), options_(std::move(options)) {
  detail::check_options("RoIHeads", options_);
  const RoIHeadsOptions& o = options_;
  box_head = register_module("box_head", std::make_shared<BoxHead>(o.in_channels * o.pooled_size * o.pooled_size,
                                                                   o.representation_size, o.num_classes, o.generator,
                                                                   box_dim(o.box_type)));
}

BoxHeadOutput RoIHeads::forward_box_head(const Tensor& features, const Tensor& rois) {
  const RoIHeadsOptions& o = options_;
  if (o.box_type == BoxType::kRotated) {
    const RoIAlignRotatedOptions align = RoIAlignRotatedOptions()
                                             .set_output_size(o.pooled_size)
                                             .set_spatial_scale(1.0 / static_cast<double>(o.feature_stride))
                                             .set_sampling_ratio(o.sampling_ratio)
                                             .set_aligned(o.aligned)
                                             .set_check_roi_values(o.check_proposal_values);  // 1 sync on CUDA
    return box_head->forward(roi_align_rotated(features, rois, align));
  }
  const RoIAlignOptions align = RoIAlignOptions()
                                    .set_output_size(o.pooled_size)
                                    .set_spatial_scale(1.0 / static_cast<double>(o.feature_stride))
                                    .set_sampling_ratio(o.sampling_ratio)
                                    .set_aligned(o.aligned)
                                    .set_check_roi_values(o.check_proposal_values);  // the check: 1 sync on CUDA
  return box_head->forward(roi_align(features, rois, align));
}

std::map<std::string, Tensor> RoIHeads::forward_train(const Tensor& features, const PaddedProposals& proposals,
                                                      const std::vector<Tensor>& gt_boxes,
                                                      const std::vector<Tensor>& gt_labels, Generator* generator) {
  const auto scope = open_scope();
  const char* op = "RoIHeads::forward_train";
  // Constants of the second stage, as in torchvision: no loss moves a proposal.
  const std::vector<Tensor> slots =
      checked_slots(op, proposals, box_dim(options_.box_type), box_layout(options_.box_type));
  const PaddedProposals detached{proposals.boxes.detach(), proposals.counts};
  detail::check_features(op, features, options_.in_channels, slots);
  detail::check_targets_shapes(op, slots, gt_boxes, gt_labels);
  if (options_.check_targets) check_roi_targets(gt_boxes, gt_labels, options_.num_classes);  // 1 sync on CUDA
  const RoISample sample = sample_rois_padded(detached, gt_boxes, gt_labels, options_, generator);
  return box_losses(features, sample);
}

std::map<std::string, Tensor> RoIHeads::box_losses(const Tensor& features, const RoISample& sample) {
  if (!forward_replaced()) return forward_box_losses(features, sample);
  const std::vector<Tensor> out =
      call_replacement({features, sample.rois, sample.labels, sample.regression_targets, sample.valid}, 2);
  return {{"loss_classifier", out[0]}, {"loss_box_reg", out[1]}};
}

std::map<std::string, Tensor> RoIHeads::forward_box_losses(const Tensor& features, const RoISample& sample) {
  return roi_heads_loss(forward_box_head(features, sample.rois), sample, options_.smooth_l1_beta);
}

std::vector<Detections> RoIHeads::forward_infer(const Tensor& features, const PaddedProposals& proposals,
                                                const ImageSizes& image_sizes) {
  const auto scope = open_scope();
  const char* op = "RoIHeads::forward_infer";
  const std::vector<Tensor> slots =
      checked_slots(op, proposals, box_dim(options_.box_type), box_layout(options_.box_type));
  detail::check_features(op, features, options_.in_channels, slots);
  NoGradGuard no_grad;
  // rois: every slot of every image with the image's index in front (N P rows). The slots past an image's count
  // are scored too and dropped by postprocess_detections.
  const int64_t images = proposals.boxes.size(0), per_image = proposals.boxes.size(1);
  const Tensor rois = cat({slot_images(images, per_image, proposals.boxes.options()).unsqueeze(1),
                           proposals.boxes.detach().reshape({images * per_image, proposals.boxes.size(2)})},
                          1);
  return postprocess_detections(forward_box_head(features, rois), proposals, image_sizes, options_);
}

}  // namespace minidet::models
