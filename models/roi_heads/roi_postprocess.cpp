// postprocess_detections: from the box head's outputs to per-image detections (math in roi_heads.h).
//
// Every image is handled in the same few device passes over a "candidate table" of all (RoI, class) pairs
// of the batch, so the host synchronisations do not grow with the batch size:
//   table (T, D + 2) = [box, score, group]          T = K * C, group = image * (C + 1) + class, D = 4 or 5
//   candidates   = nonzero(score > threshold and both sides >= min_size)          (sync: the count)
//   rows         = index_select(table, candidates)                                (sync: index check)
//   keep         = batched_nms(boxes, scores, group)                              (sync: the kept count)
//   kept         = index_select(rows, keep), copied to the host                   (syncs: index check, copy)
// Grouping by (image, class) makes one NMS call equal to a per-image, per-class NMS: boxes of different
// groups never suppress each other, and NMS returns the kept rows in decreasing score order, so each image's
// rows come out in its own decreasing order (the sort is stable: ties keep input order, as per image). The
// host then walks the kept rows once and gives each image its first detections_per_image.
// The group travels as a float in the table: it is an integer below 2^24 (checked), exact in float32.
#include <algorithm>
#include <vector>

#include "core/factories.h"
#include "models/common/box_type.h"
#include "models/common/image_sizes.h"
#include "models/roi_heads/roi_heads.h"
#include "models/roi_heads/roi_inputs.h"
#include "ops/common/checks.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/indexing/index_select.h"
#include "ops/indexing/nonzero.h"
#include "ops/indexing/where.h"
#include "ops/shape/shape.h"
#include "ops/softmax/softmax.h"

namespace minidet::models {

namespace {

void check_head_outputs(const char* op, const BoxHeadOutput& head, int64_t rois, int64_t num_classes,
                        const Tensor& proposals0) {
  const int64_t d = proposals0.size(1);
  const Tensor &logits = head.class_logits, &deltas = head.box_deltas;
  ops::check_defined(op, logits, "class_logits");
  ops::check_defined(op, deltas, "box_deltas");
  MINIDET_CHECK(logits.dim() == 2 && logits.size(0) == rois && logits.size(1) == num_classes + 1, op,
                ": expected class_logits of shape (", rois, ", ", num_classes + 1,
                ") (one row per proposal, background and ", num_classes, " classes), got ", logits.sizes());
  MINIDET_CHECK(deltas.dim() == 2 && deltas.size(0) == rois && deltas.size(1) == d * (num_classes + 1), op,
                ": expected box_deltas of shape (", rois, ", ", d * (num_classes + 1), "), got ", deltas.sizes());
  ops::check_same_dtype(op, logits, "class_logits", proposals0, "proposals");
  ops::check_same_dtype(op, deltas, "box_deltas", proposals0, "proposals");
  ops::check_same_device(op, logits, "class_logits", proposals0, "proposals");
  ops::check_same_device(op, deltas, "box_deltas", proposals0, "proposals");
}

}  // namespace

std::vector<Detections> postprocess_detections(const BoxHeadOutput& head, const std::vector<Tensor>& proposals,
                                               const ImageSizes& image_sizes, const RoIHeadsOptions& options) {
  const char* op = "postprocess_detections";
  detail::check_options(op, options);
  check_proposal_list(op, proposals);
  const BoxType type = options.box_type;
  const int64_t d = box_dim(type);
  MINIDET_CHECK(proposals[0].size(1) == d, op, ": expected proposals of shape (P, ", d, ") ", box_layout(type),
                ", got ", proposals[0].sizes());
  const int64_t images = static_cast<int64_t>(proposals.size()), num_classes = options.num_classes;
  detail::check_image_sizes(op, image_sizes, images);
  int64_t rois = 0;
  for (const Tensor& p : proposals) rois += p.size(0);
  check_head_outputs(op, head, rois, num_classes, proposals[0]);
  const TensorOptions box_options = proposals[0].options(), index_options(kInt64, box_options.device);
  MINIDET_CHECK(box_options.dtype != kFloat32 || images * (num_classes + 1) <= (int64_t{1} << 24), op,
                ": images * (classes + 1) must stay below 2^24 in float32, got ", images * (num_classes + 1));

  std::vector<Detections> detections(static_cast<size_t>(images));
  auto empty_detections = [&]() {
    for (Detections& none : detections)
      none = {zeros({0, d}, box_options), zeros({0}, box_options), zeros({0}, index_options)};
    return detections;
  };
  if (rois == 0) return empty_detections();

  NoGradGuard no_grad;
  const int64_t classes = num_classes + 1, candidates = rois * num_classes;
  // Every class's box for every RoI, clipped to its own image (axis-aligned boxes): (K, C + 1, D).
  std::vector<Tensor> reference, clipped, image_of_roi;
  for (const Tensor& p : proposals) reference.push_back(p.detach());
  const BoxTypeCoder coder(type, options.box_coder_weights, options.box_coder_angle_weight, options.rotated_offsets);
  const Tensor decoded = coder.decode(head.box_deltas.detach(), cat(reference, 0));
  const Tensor all_boxes = reshape(decoded, {rois, classes, d});
  for (int64_t n = 0, start = 0; n < images; start += proposals[n].size(0), ++n) {
    const Tensor own = narrow(all_boxes, 0, start, proposals[n].size(0));
    const double height = static_cast<double>(image_sizes[n][0]), width = static_cast<double>(image_sizes[n][1]);
    clipped.push_back(clip_to_image(type, own, height, width));
    image_of_roi.push_back(full({proposals[n].size(0)}, static_cast<double>(n), index_options));
  }
  // Drop the background column (class 0): (K, C, D) boxes, (K, C) scores and groups.
  const Tensor boxes = slice(cat(clipped, 0), 1, 1, classes);
  const Tensor scores = slice(softmax(head.class_logits.detach(), 1), 1, 1, classes);
  const Tensor class_ids = arange(1.0, static_cast<double>(classes), 1.0, index_options);
  const Tensor group =
      add(mul(cat(image_of_roi, 0).unsqueeze(1), static_cast<double>(classes)), class_ids.unsqueeze(0));

  // Candidates: above the score threshold and not small (remove_small_boxes' rule: both sides >= min_size).
  const Tensor sides = box_sides(type, boxes);
  const Tensor widths = select(sides, 2, 0), heights = select(sides, 2, 1);
  const Tensor big = where(ge(widths, options.min_size), ge(heights, options.min_size), ge(widths, options.min_size));
  const Tensor keep_mask = where(gt(scores, options.score_threshold), big, gt(scores, options.score_threshold));
  const Tensor table = cat({reshape(boxes, {candidates, d}), reshape(scores, {candidates, 1}),
                            reshape(group.to(box_options.dtype), {candidates, 1})}, 1);
  const Tensor rows = index_select(table, 0, flat_nonzero(keep_mask));
  if (rows.size(0) == 0) return empty_detections();
  const Tensor keep = batched_nms(type, slice(rows, 1, 0, d), select(rows, 1, d),
                                 select(rows, 1, d + 1).to(kInt64), options.nms_threshold);
  const std::vector<double> kept = index_select(rows, 0, keep).to_vector<double>();  // (k, D + 2), decreasing score

  // Each image's first detections_per_image rows, in the order NMS kept them.
  std::vector<std::vector<double>> image_boxes(images), image_scores(images);
  std::vector<std::vector<int64_t>> image_labels(images);
  const size_t width = static_cast<size_t>(d + 2);
  for (size_t r = 0; r < kept.size() / width; ++r) {
    const double* row = kept.data() + width * r;
    const int64_t g = static_cast<int64_t>(row[d + 1]), n = g / classes;
    if (static_cast<int64_t>(image_scores[n].size()) >= options.detections_per_image) continue;
    image_boxes[n].insert(image_boxes[n].end(), row, row + d);
    image_scores[n].push_back(row[d]);
    image_labels[n].push_back(g % classes);
  }
  for (int64_t n = 0; n < images; ++n) {
    const int64_t count = static_cast<int64_t>(image_scores[n].size());
    // The values came from tensors of this dtype: converting back is exact.
    detections[n].boxes = from_vector<double>(image_boxes[n], {count, d}).to(box_options);
    detections[n].scores = from_vector<double>(image_scores[n], {count}).to(box_options);
    detections[n].labels = from_vector<int64_t>(image_labels[n], {count}).to(index_options);
  }
  return detections;
}

}  // namespace minidet::models
