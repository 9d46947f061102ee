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
  MINIDET_CHECK(proposals.boxes.defined(), op, ": the padded proposals' boxes are undefined");
  const int64_t d = box_dim(options_.box_type);
  MINIDET_CHECK(proposals.boxes.dim() == 3 && proposals.boxes.size(2) == d, op,
                ": expected padded proposals of shape (N, P, ", d, ") ", box_layout(options_.box_type), ", got ",
                proposals.boxes.sizes());
  // Constants of the second stage, as in torchvision: no loss moves a proposal.
  const PaddedProposals detached{proposals.boxes.detach(), proposals.counts};
  std::vector<Tensor> slots;  // image n's rows, as views: the checks of shapes, dtypes and devices
  for (int64_t n = 0; n < detached.boxes.size(0); ++n) slots.push_back(detached.boxes.select(0, n));
  check_proposal_list(op, slots);
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

std::vector<Detections> RoIHeads::forward_infer(const Tensor& features, const std::vector<Tensor>& proposals,
                                                const ImageSizes& image_sizes) {
  const auto scope = open_scope();
  const char* op = "RoIHeads::forward_infer";
  check_proposal_list(op, proposals);
  const int64_t d = box_dim(options_.box_type);
  MINIDET_CHECK(proposals[0].size(1) == d, op, ": expected proposals of shape (P, ", d, ") ",
                box_layout(options_.box_type), ", got ", proposals[0].sizes());
  detail::check_features(op, features, options_.in_channels, proposals);
  NoGradGuard no_grad;
  // rois: every proposal with its image's index in front, in image order (the index column in one copy).
  std::vector<Tensor> boxes;
  std::vector<int64_t> counts;
  for (const Tensor& p : proposals) {
    boxes.push_back(p.detach());
    counts.push_back(p.size(0));
  }
  const Tensor rois = cat({image_of_rows(counts, proposals[0].options()).unsqueeze(1), cat(boxes, 0)}, 1);
  return postprocess_detections(forward_box_head(features, rois), proposals, image_sizes, options_);
}

}  // namespace minidet::models
