// rpn_proposals: the whole batch as fixed-size (N, T) tables, T = min(pre_nms_top_n, K), and masks.
//
//   best      = topk(objectness, T, dim 1)                 (N, T) sorted, ties in input order
//   boxes     = clip(decode(deltas[best], anchors[best]))  (N, T, D)   gathered without a host index check;
//                                                          D = 4, or 5 for rotated anchors (not clipped)
//   valid     = both sides >= min_size and sigmoid(best) >= score_threshold
//   kept      = NMS of each image's T rows as a mask (segmented_nms_mask; a zero box where not valid)
//   selected  = valid and kept                             (N, T) mask
//   order     = argsort(selected, dim 1, descending)       stable: each image's selected positions first,
//                                                          in position order = decreasing score order
//   rows      = boxes[order[:, :P]]                        (N, P, D), P = min(post_nms_top_n, T)
//   counts    = sum(selected, dim 1)                       image n's proposals are rows[n, :min(count_n, P)]
// rpn_proposals copies the counts to the host (THE sync) and cuts each image's slice; rpn_proposals_padded
// returns rows and counts as they are, for a training step that never waits (models/common/padded_proposals.h).
// An invalid row cannot touch a valid one in NMS: a zero box (of either type) has IoU 0 with anything, and its score
// -1 sorts it after every valid row. Zeroing it also keeps NaN (from NaN objectness or deltas) out of NMS, which would
// refuse it: such a row simply is not a proposal, as remove_small_boxes drops NaN boxes. So each image's segment gives
// exactly NMS over the image's own valid rows. In anomaly mode (autograd/anomaly.h) such NaN rows are an error
// instead, naming how many there are.
#include "models/rpn/rpn_proposals.h"

#include <algorithm>
#include <cmath>

#include "autograd/anomaly.h"
#include "core/factories.h"
#include "models/common/box_type.h"
#include "models/common/image_sizes.h"
#include "ops/take_rows/take_rows.h"
#include "ops/common/checks.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/shared_scalar.h"
#include "ops/elementwise/unary.h"
#include "ops/indexing/where.h"
#include "ops/shape/cat.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/shape.h"
#include "ops/sort/sort.h"

namespace minidet::models {

namespace {

// The box type is the anchors' (4 or 5 columns); deltas have as many columns.
BoxType check_inputs(const char* op, const Tensor& objectness, const Tensor& deltas, const Tensor& anchors) {
  ops::check_defined(op, objectness, "objectness");
  ops::check_defined(op, deltas, "deltas");
  ops::check_defined(op, anchors, "anchors");
  ops::check_floating(op, objectness, "objectness");
  MINIDET_CHECK(objectness.dim() == 2, op, ": expected objectness of shape (N, K), got ", objectness.sizes());
  const int64_t images = objectness.size(0), k = objectness.size(1);
  const BoxType type = box_type_of(op, anchors, "anchors");
  const int64_t d = box_dim(type);
  MINIDET_CHECK(deltas.dim() == 3 && deltas.size(0) == images && deltas.size(1) == k && deltas.size(2) == d, op,
                ": expected deltas of shape (N, K, ", d, ") = (", images, ", ", k, ", ", d, "), got ", deltas.sizes());
  MINIDET_CHECK(anchors.dim() == 2 && anchors.size(0) == k, op, ": expected anchors of shape (K, ", d, ") = (", k,
                ", ", d, "), got ", anchors.sizes());
  ops::check_same_dtype(op, deltas, "deltas", objectness, "objectness");
  ops::check_same_dtype(op, anchors, "anchors", objectness, "objectness");
  ops::check_same_device(op, deltas, "deltas", objectness, "objectness");
  ops::check_same_device(op, anchors, "anchors", objectness, "objectness");
  return type;
}

}  // namespace

void check_proposal_options(const char* op, const ProposalOptions& o) {
  MINIDET_CHECK(o.pre_nms_top_n >= 1 && o.post_nms_top_n >= 1, op,
                ": expected pre_nms_top_n >= 1 and post_nms_top_n >= 1, got ", o.pre_nms_top_n, " and ",
                o.post_nms_top_n);
  MINIDET_CHECK(std::isfinite(o.nms_threshold) && o.nms_threshold >= 0.0 && o.nms_threshold <= 1.0, op,
                ": expected nms_threshold in [0, 1], got ", o.nms_threshold);
  MINIDET_CHECK(std::isfinite(o.score_threshold) && o.score_threshold >= 0.0 && o.score_threshold <= 1.0, op,
                ": expected score_threshold in [0, 1] (a sigmoid score), got ", o.score_threshold);
  MINIDET_CHECK(std::isfinite(o.min_size) && o.min_size >= 0.0, op, ": expected a finite min_size >= 0, got ",
                o.min_size);
}

namespace {

// Anomaly mode only: rows whose objectness or box is NaN are dropped without a word (see the top), which hides
// a diverging RPN. Here the host reads every candidate row (one device-to-host copy, which the normal path never
// makes) and fails naming how many scores and boxes are NaN.
void check_no_nan_rows(const char* op, const Tensor& logits, const Tensor& boxes) {
  const int64_t images = logits.size(0), top = logits.size(1), d = boxes.size(2);
  const std::vector<double> rows = cat({logits.unsqueeze(2), boxes}, 2).to_vector<double>();  // (N, T, 1 + D)
  int64_t nan_scores = 0, nan_boxes = 0;
  for (size_t r = 0; r < rows.size(); r += static_cast<size_t>(1 + d)) {
    nan_scores += std::isnan(rows[r]);
    const auto box = rows.begin() + static_cast<std::ptrdiff_t>(r) + 1;
    nan_boxes += std::any_of(box, box + d, [](double v) { return std::isnan(v); });
  }
  MINIDET_CHECK(nan_scores == 0 && nan_boxes == 0, "anomaly: ", op, ": of the ", images * top,
                " candidate rows (the top ", top, " of each of ", images, " images), ", nan_scores,
                " have a NaN objectness score and ", nan_boxes,
                " a NaN box; outside anomaly mode they are dropped as if they were not proposals");
}

// Everything up to the counts, on the device: (N, P, D) rows in selection order, the per-image counts of
// selected rows (N), and NMS's status. images == 0 or top == 0: undefined tensors.
struct Selected {
  Tensor rows, counts, status;
};

Selected select_proposals(const char* op, const Tensor& objectness, const Tensor& deltas, const Tensor& anchors,
                          const std::vector<std::array<int64_t, 2>>& image_sizes, const ProposalOptions& options) {
  check_proposal_options(op, options);
  const BoxType type = check_inputs(op, objectness, deltas, anchors);
  const int64_t images = objectness.size(0), k = objectness.size(1), d = box_dim(type);
  detail::check_image_sizes(op, image_sizes, images);
  const TensorOptions box_options = anchors.options();
  const int64_t top = std::min(options.pre_nms_top_n, k), post = std::min(options.post_nms_top_n, top);
  if (images == 0 || top == 0) return {};

  NoGradGuard no_grad;
  const ValuesIndices best = topk(objectness.detach(), top, 1);  // (N, T)
  const Tensor top_deltas = take_rows(deltas.detach(), best.indices).reshape({images * top, d});
  const Tensor top_anchors = take_rows(anchors.detach().unsqueeze(0), best.indices.reshape({1, images * top}));
  const BoxTypeCoder coder(type, {1.0, 1.0, 1.0, 1.0}, 1.0, options.rotated_offsets);
  const Tensor decoded = coder.decode(top_deltas, top_anchors.reshape({images * top, d}));
  const Tensor boxes =
      clip_to_images(type, decoded, image_sizes, std::vector<int64_t>(static_cast<size_t>(images), top))
          .view({images, top, d});  // (N, T, D)
  if (autograd::AnomalyMode::is_enabled()) check_no_nan_rows(op, best.values, boxes);
  const Tensor scores = sigmoid(best.values);
  const Tensor sides = box_sides(type, boxes);  // (N, T, 2): widths, heights
  const Tensor big = ge(minimum(sides.select(2, 0), sides.select(2, 1)), options.min_size);
  const Tensor valid = where(big, ge(scores, options.score_threshold), big);  // big and confident; NaN fails

  const Tensor nms_boxes = where(valid.unsqueeze(2), boxes, shared_scalar(0.0, box_options));
  const Tensor nms_scores = where(valid, scores, shared_scalar(-1.0, box_options));  // after every valid row
  // One NMS per image (segment), each image's T rows a run of its own: no sync, the kept rows as a mask,
  // NMS's status stays on the device. An invalid row is a zero box (IoU 0 with anything) scored -1.
  const NmsMask nms = segmented_nms_mask(type, nms_boxes.reshape({images * top, d}), nms_scores.reshape({images * top}),
                                         images, options.nms_threshold);
  const Tensor selected = where(valid, nms.keep_mask.reshape({images, top}), valid);  // (N, T) bool

  const Tensor order = argsort(selected.to(kUInt8), 1, /*descending=*/true).narrow(1, 0, post);
  return {take_rows(boxes, order), sum(selected, {1}), nms.status};  // (N, P, D), (N), (2)
}

}  // namespace

std::vector<Tensor> rpn_proposals(const Tensor& objectness, const Tensor& deltas, const Tensor& anchors,
                                  const std::vector<std::array<int64_t, 2>>& image_sizes,
                                  const ProposalOptions& options) {
  const char* op = "rpn_proposals";
  const Selected s = select_proposals(op, objectness, deltas, anchors, image_sizes, options);
  const int64_t images = objectness.size(0);
  std::vector<Tensor> proposals;
  if (!s.rows.defined()) {
    for (int64_t n = 0; n < images; ++n) proposals.push_back(zeros({0, anchors.size(1)}, anchors.options()));
    return proposals;
  }
  const int64_t post = s.rows.size(1);
  // The one synchronisation: per-image counts and NMS's status travel together.
  const std::vector<int64_t> counts = cat({s.counts, s.status}, 0).to_vector<int64_t>();
  check_nms_status(op, {counts[images], counts[images + 1]});  // never fires: NMS sees finite rows
  for (int64_t n = 0; n < images; ++n)
    proposals.push_back(s.rows.select(0, n).narrow(0, 0, std::min(counts[n], post)));
  return proposals;
}

PaddedProposals rpn_proposals_padded(const Tensor& objectness, const Tensor& deltas, const Tensor& anchors,
                                     const std::vector<std::array<int64_t, 2>>& image_sizes,
                                     const ProposalOptions& options) {
  const Selected s = select_proposals("rpn_proposals_padded", objectness, deltas, anchors, image_sizes, options);
  if (!s.rows.defined()) {
    const int64_t images = objectness.size(0);
    return {zeros({images, 0, anchors.size(1)}, anchors.options()),
            zeros({images}, TensorOptions(kInt64, anchors.device()))};
  }
  // A count can exceed P (more rows survive NMS than post_nms_top_n): the image keeps P.
  const double post = static_cast<double>(s.rows.size(1));
  return {s.rows, where(gt(s.counts, post), shared_scalar(post, s.counts.options()), s.counts)};
}

}  // namespace minidet::models
