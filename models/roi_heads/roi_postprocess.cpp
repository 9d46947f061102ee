// postprocess_detections: from the box head's outputs to per-image detections (math in roi_heads.h).
//
// Every image is handled in the same few device passes over a "candidate table" of all (RoI, class) pairs
// of the batch, so neither the launches nor the host synchronisations grow with the batch size:
//   boxes        = clip(decode(deltas, rois))   one clip per run of images of one size (clip_to_images)
//   table (T, D + 2) = [box, score, group]          T = K * C, group = image * (C + 1) + class, D = 4 or 5
//   candidates   = nonzero(score > threshold and both sides >= min_size)          (sync: the count)
//   rows         = take_rows(table, candidates)
//   keep         = batched_nms(boxes, scores, group)                              (sync: the kept count)
//   kept         = take_rows(rows, keep), copied to the host                      (sync: the copy)
// Grouping by (image, class) makes one NMS call equal to a per-image, per-class NMS: boxes of different
// groups never suppress each other, and NMS returns the kept rows in decreasing score order, so each image's
// rows come out in its own decreasing order (the sort is stable: ties keep input order, as per image). The
// host then walks the kept rows once, gives each image its first detections_per_image, and sends them all
// back in two copies (pack_detections).
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
#include "ops/elementwise/shared_scalar.h"
#include "ops/indexing/nonzero.h"
#include "ops/indexing/where.h"
#include "ops/shape/shape.h"
#include "ops/softmax/softmax.h"
#include "ops/take_rows/take_rows.h"

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

// table (R, W) rows `index` (n) -> (n, W), with take_rows: the indices come from nonzero and NMS, in range by
// construction, so index_select's host-side check (a synchronisation on CUDA) would buy nothing.
Tensor take_table_rows(const Tensor& table, const Tensor& index) {
  return take_rows(table.unsqueeze(0), index.unsqueeze(0)).squeeze(0);
}

// The per-image detections on `options`' device from the host's per-image values, in two copies whatever the
// number of images: one of every box and score (options' dtype; they came from tensors of that dtype, so
// converting back is exact), one of the labels. Each image's tensors are contiguous views into those two.
std::vector<Detections> pack_detections(const std::vector<std::vector<double>>& boxes,
                                        const std::vector<std::vector<double>>& scores,
                                        const std::vector<std::vector<int64_t>>& labels, int64_t d,
                                        const TensorOptions& options) {
  std::vector<double> values;  // every image's boxes, then every image's scores
  std::vector<int64_t> all_labels;
  for (const auto& b : boxes) values.insert(values.end(), b.begin(), b.end());
  const int64_t scores_at = static_cast<int64_t>(values.size());
  for (const auto& s : scores) values.insert(values.end(), s.begin(), s.end());
  for (const auto& l : labels) all_labels.insert(all_labels.end(), l.begin(), l.end());
  const Tensor value_table = from_vector<double>(values, {static_cast<int64_t>(values.size())}).to(options);
  const Tensor label_table = from_vector<int64_t>(all_labels, {static_cast<int64_t>(all_labels.size())})
                                 .to(TensorOptions(kInt64, options.device));
  std::vector<Detections> detections(scores.size());
  for (size_t n = 0, first = 0; n < scores.size(); first += scores[n].size(), ++n) {
    const int64_t count = static_cast<int64_t>(scores[n].size()), at = static_cast<int64_t>(first);
    detections[n].boxes = value_table.narrow(0, at * d, count * d).view({count, d});
    detections[n].scores = value_table.narrow(0, scores_at + at, count);
    detections[n].labels = label_table.narrow(0, at, count);
  }
  return detections;
}

}  // namespace

std::vector<Detections> postprocess_detections(const BoxHeadOutput& head, const PaddedProposals& proposals,
                                               const ImageSizes& image_sizes, const RoIHeadsOptions& options) {
  const char* op = "postprocess_detections";
  detail::check_options(op, options);
  const BoxType type = options.box_type;
  const int64_t d = box_dim(type);
  const std::vector<Tensor> slots = checked_slots(op, proposals, d, box_layout(type));
  const int64_t images = proposals.boxes.size(0), per_image = proposals.boxes.size(1);
  const int64_t num_classes = options.num_classes, rois = images * per_image;
  detail::check_image_sizes(op, image_sizes, images);
  check_head_outputs(op, head, rois, num_classes, slots[0]);
  const TensorOptions box_options = proposals.boxes.options(), index_options(kInt64, box_options.device);
  MINIDET_CHECK(box_options.dtype != kFloat32 || images * (num_classes + 1) <= (int64_t{1} << 24), op,
                ": images * (classes + 1) must stay below 2^24 in float32, got ", images * (num_classes + 1));

  // Each image's detections, gathered on the host (see the top): boxes, scores and labels, image by image.
  std::vector<std::vector<double>> image_boxes(images), image_scores(images);
  std::vector<std::vector<int64_t>> image_labels(images);
  const auto pack = [&]() { return pack_detections(image_boxes, image_scores, image_labels, d, box_options); };
  if (rois == 0) return pack();

  NoGradGuard no_grad;
  const int64_t classes = num_classes + 1, candidates = rois * num_classes;
  const std::vector<int64_t> rois_per_image(static_cast<size_t>(images), per_image);
  // Every class's box for every slot, clipped to its own image (axis-aligned boxes): (K, C + 1, D), K = N P.
  const BoxTypeCoder coder(type, options.box_coder_weights, options.box_coder_angle_weight, options.rotated_offsets);
  const Tensor decoded = coder.decode(head.box_deltas.detach(), proposals.boxes.detach().reshape({rois, d}));
  const Tensor all_boxes = clip_to_images(type, reshape(decoded, {rois, classes, d}), image_sizes, rois_per_image);
  // Drop the background column (class 0): (K, C, D) boxes, (K, C) scores and groups.
  const Tensor boxes = slice(all_boxes, 1, 1, classes);
  const Tensor scores = slice(softmax(head.class_logits.detach(), 1), 1, 1, classes);
  // The indices below come from the process's shared aranges: no upload once a batch size has been seen.
  const Tensor class_ids = shared_arange(classes, index_options).narrow(0, 1, num_classes);
  const Tensor group =
      add(mul(slot_images(images, per_image, index_options).unsqueeze(1), static_cast<double>(classes)),
          class_ids.unsqueeze(0));
  // A slot holds a proposal when it is below its image's count (the counts stay on the device): (K, 1).
  const Tensor slot = shared_arange(per_image, index_options).unsqueeze(0);  // (1, P)
  const Tensor proposal = lt(slot, proposals.counts.unsqueeze(1)).reshape({rois, 1});

  // Candidates: above the score threshold and not small (remove_small_boxes' rule: both sides >= min_size).
  const Tensor sides = box_sides(type, boxes);
  const Tensor widths = select(sides, 2, 0), heights = select(sides, 2, 1);
  const Tensor big = where(ge(widths, options.min_size), ge(heights, options.min_size), ge(widths, options.min_size));
  const Tensor confident = where(gt(scores, options.score_threshold), big, gt(scores, options.score_threshold));
  const Tensor keep_mask = logical_and(proposal, confident);  // (K, C), and the slot holds a proposal
  const Tensor table = cat({reshape(boxes, {candidates, d}), reshape(scores, {candidates, 1}),
                            reshape(group.to(box_options.dtype), {candidates, 1})}, 1);
  const Tensor rows = take_table_rows(table, flat_nonzero(keep_mask));
  if (rows.size(0) == 0) return pack();
  const Tensor keep = batched_nms(type, slice(rows, 1, 0, d), select(rows, 1, d),
                                 select(rows, 1, d + 1).to(kInt64), options.nms_threshold);
  const std::vector<double> kept = take_table_rows(rows, keep).to_vector<double>();  // (k, D + 2), decreasing score

  // Each image's first detections_per_image rows, in the order NMS kept them.
  const size_t width = static_cast<size_t>(d + 2);
  for (size_t r = 0; r < kept.size() / width; ++r) {
    const double* row = kept.data() + width * r;
    const int64_t g = static_cast<int64_t>(row[d + 1]), n = g / classes;
    if (static_cast<int64_t>(image_scores[n].size()) >= options.detections_per_image) continue;
    image_boxes[n].insert(image_boxes[n].end(), row, row + d);
    image_scores[n].push_back(row[d]);
    image_labels[n].push_back(g % classes);
  }
  return pack();
}

}  // namespace minidet::models
