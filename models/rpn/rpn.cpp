// RPN: the module that strings anchors, head, losses and proposals together (math in rpn.h).
#include "models/rpn/rpn.h"

#include <utility>

#include "core/error.h"
#include "models/common/image_sizes.h"
#include "ops/box_iou_rotated/rotated_box_math.h"
#include "ops/common/checks.h"

namespace minidet::models {

namespace {

using rotated_box_math::kPi;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One positive size per image, each within the padded batch (its anchors cover only H x W).
void check_batch(const char* op, std::array<int64_t, 2> image_size, const ImageSizes& image_sizes, int64_t images) {
  detail::check_image_sizes(op, image_sizes, images);
  for (int64_t n = 0; n < images; ++n)
    MINIDET_CHECK(image_sizes[n][0] <= image_size[0] && image_sizes[n][1] <= image_size[1], op, ": image ", n,
                  " of size (", image_sizes[n][0], ", ", image_sizes[n][1], ") is larger than the padded batch (",
                  image_size[0], ", ", image_size[1], ")");
}

// The batch (above) and one gt_boxes tensor per image.
void check_targets(const char* op, std::array<int64_t, 2> image_size, const ImageSizes& image_sizes, int64_t images,
                   const std::vector<Tensor>& gt_boxes) {
  check_batch(op, image_size, image_sizes, images);
  MINIDET_CHECK(static_cast<int64_t>(gt_boxes.size()) == images, op, ": expected one gt_boxes tensor per image (",
                images, "), got ", gt_boxes.size());
}

}  // namespace

RPN::RPN(RPNOptions options)
    : Module("RPN"), options_(std::move(options)), anchor_generator_({options_.anchor_sizes}, {options_.aspect_ratios}) {
  MINIDET_CHECK(options_.in_channels > 0 && options_.feature_stride > 0,
                "RPN: in_channels and feature_stride must be positive, got ", options_.in_channels, " and ",
                options_.feature_stride);
  check_proposal_options("RPN (train_proposals)", options_.train_proposals);
  check_proposal_options("RPN (test_proposals)", options_.test_proposals);
  int64_t anchors_per_location = anchor_generator_.num_anchors_per_location(0);
  if (options_.box_type == BoxType::kRotated) {
    std::vector<double> radians;
    for (double degrees : options_.anchor_angles_degrees) radians.push_back(degrees * kPi / 180.0);
    rotated_anchor_generator_.emplace(std::vector<std::vector<double>>{options_.anchor_sizes},
                                      std::vector<std::vector<double>>{options_.aspect_ratios},
                                      std::vector<std::vector<double>>{radians});
    anchors_per_location = rotated_anchor_generator_->num_anchors_per_location(0);
  }
  head = register_module("head", std::make_shared<RPNHead>(options_.in_channels, anchors_per_location,
                                                           options_.generator, box_dim(options_.box_type)));
}

Tensor RPN::anchors(std::array<int64_t, 2> image_size, const Tensor& features) {
  const char* op = "RPN";
  ops::check_defined(op, features, "features");
  ops::check_floating(op, features, "features");
  const auto [height, width] = image_size;
  const int64_t stride = options_.feature_stride;
  MINIDET_CHECK(height > 0 && width > 0, op, ": expected a positive padded image size (H, W), got (", height, ", ",
                width, ")");
  MINIDET_CHECK(features.dim() == 4 && features.size(1) == options_.in_channels, op,
                ": expected features of shape (N, ", options_.in_channels, ", h, w), got ", features.sizes());
  const Tensor& weight = head->conv->weight;
  MINIDET_CHECK(features.dtype() == weight.dtype() && features.device() == weight.device(), op,
                ": expected features of the head's dtype and device (", weight.dtype(), ", ", weight.device(),
                "), got ", features.dtype(), ", ", features.device());
  MINIDET_CHECK(features.size(2) == ceil_div(height, stride) && features.size(3) == ceil_div(width, stride), op,
                ": features of size ", features.size(2), " x ", features.size(3), " do not match an image of ", height,
                " x ", width, " at stride ", stride, " (expected ", ceil_div(height, stride), " x ",
                ceil_div(width, stride), "): the anchors would not cover the image");
  // The configured stride rather than AnchorGenerator::anchors' integer H / h: the two agree whenever H is
  // a multiple of the stride, and when it is not, H / h would shrink the stride and misplace every anchor.
  if (rotated_anchor_generator_)
    return rotated_anchor_generator_->grid_anchors(0, features.size(2), features.size(3), stride, stride,
                                                   features.options());
  return anchor_generator_.grid_anchors(0, features.size(2), features.size(3), stride, stride, features.options());
}

RPNTrainOutput RPN::forward_train(const Tensor& features, std::array<int64_t, 2> image_size,
                                  const ImageSizes& image_sizes, const std::vector<Tensor>& gt_boxes,
                                  Generator* generator) {
  const auto scope = open_scope();
  const Tensor grid = anchors(image_size, features);
  check_targets("RPN::forward_train", image_size, image_sizes, features.size(0), gt_boxes);
  const RPNHeadOutput out = (*head)(features);
  const Tensor objectness = flatten_objectness(out.objectness), deltas = flatten_deltas(out.deltas, head->box_dim);
  RPNTrainOutput result;
  result.losses = rpn_loss(objectness, deltas, grid, gt_boxes, generator, options_.loss);
  result.proposals = rpn_proposals_padded(objectness, deltas, grid, image_sizes, options_.train_proposals);
  return result;
}

PaddedProposals RPN::forward_infer(const Tensor& features, std::array<int64_t, 2> image_size,
                                   const ImageSizes& image_sizes) {
  const auto scope = open_scope();
  const Tensor grid = anchors(image_size, features);
  check_batch("RPN::forward_infer", image_size, image_sizes, features.size(0));
  NoGradGuard no_grad;
  const RPNHeadOutput out = (*head)(features);
  return rpn_proposals_padded(flatten_objectness(out.objectness), flatten_deltas(out.deltas, head->box_dim), grid,
                              image_sizes, options_.test_proposals);
}

std::string RPN::extra_repr() const {
  return "in=" + std::to_string(options_.in_channels) + ", stride=" + std::to_string(options_.feature_stride) +
         ", anchors=" + std::to_string(head->num_anchors);
}

}  // namespace minidet::models
