// sample_rois_padded (the training path), sample_rois (its per-image reference) and check_roi_targets: the
// training targets of the box head (math in roi_heads.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "models/common/box_type.h"
#include "ops/take_rows/take_rows.h"
#include "models/matcher/matcher.h"
#include "models/roi_heads/roi_heads.h"
#include "models/roi_heads/roi_inputs.h"
#include "models/sampler/sampler.h"
#include "ops/common/checks.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/shared_scalar.h"
#include "ops/elementwise/unary.h"
#include "ops/indexing/where.h"
#include "ops/matmul/matmul.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/shape.h"

namespace minidet::models {

namespace {

// Candidates (proposals, then objects) and what they matched: of one image, (B) and (B, 4), or of all images
// padded to W, (n, W) and (n, W, 4).
struct Candidates {
  Tensor boxes;          // (B, 4)
  Tensor class_labels;   // (B) int64: the matched object's label if foreground, 0 background, -1 ignored
  Tensor matched_boxes;  // (B, 4): the matched object's box (anything on rows that are not foreground)
};

// Every image's candidates matched at once: a fixed number of kernels for any batch, where one Matcher call
// per image would repeat all of the Matcher's kernels for every image. Candidates are padded to W, the most
// any image has, and objects to the most any image has, Mw, both with the all-zero box, whose IoU
// with anything is 0:
//   IoU        the (n Mw, n W) IoU of all objects with all candidates, of which image i's block (i, i) is
//              read in place (as_strided): n^2 Mw W small products instead of n calls;
//   Matcher    a padded object never beats a real one (ties at 0 go to the first row, a real one) and an
//              image without objects is all background, as a call per image gives;
//   labels     padded candidates are -1 (ignored: never sampled), which is also how the sampler's one call
//              for all images wants them.
// Returns (n, W) labels and (n, W, D) boxes and matched boxes; image i's candidates are the first count_i.
// widest_gt: Mw, at least 1.
Candidates match_candidates(const std::vector<Tensor>& proposals, const std::vector<Tensor>& gt_boxes,
                            const std::vector<Tensor>& gt_labels, const std::vector<size_t>& images, int64_t widest,
                            int64_t widest_gt, const Matcher& matcher, const Tensor& positions) {
  const TensorOptions box_options = proposals[0].options(), index_options(kInt64, box_options.device);
  const BoxType type = box_type_of("match_candidates", proposals[0], "proposals");
  const int64_t n = static_cast<int64_t>(images.size()), d = box_dim(type);
  const Tensor empty_boxes = zeros({std::max(widest, widest_gt), d}, box_options);
  const Tensor no_labels = zeros({widest_gt}, index_options);
  std::vector<Tensor> boxes, objects, labels;
  std::vector<int64_t> counts;
  for (size_t i : images) {
    const int64_t count = proposals[i].size(0) + gt_boxes[i].size(0), m = gt_boxes[i].size(0);
    counts.push_back(count);
    for (const Tensor& piece :
         {proposals[i].detach(), gt_boxes[i].detach(), narrow(empty_boxes, 0, 0, widest - count)})
      if (piece.size(0) > 0) boxes.push_back(piece);
    objects.push_back(gt_boxes[i].detach());
    labels.push_back(gt_labels[i]);
    if (m < widest_gt) {
      objects.push_back(narrow(empty_boxes, 0, 0, widest_gt - m));
      labels.push_back(narrow(no_labels, 0, 0, widest_gt - m));
    }
  }
  const Tensor all_boxes = cat(boxes, 0), all_objects = cat(objects, 0);  // (n W, D), (n Mw, D)
  const Tensor object_labels = cat(labels, 0).view({n, 1, widest_gt});
  // Image i's block of the IoU matrix: rows i Mw.., columns i W..; one step along i moves Mw rows and W columns.
  const Tensor iou = pairwise_iou(type, all_objects, all_boxes);
  const Tensor quality = iou.as_strided({n, widest_gt, widest}, {widest_gt * n * widest + widest, n * widest, 1},
                                        iou.storage_offset())
                             .contiguous();
  const MatchResult match = matcher(quality);  // (n, W)
  const Tensor real = lt(narrow(positions, 0, 0, widest).unsqueeze(0),
                         from_vector<int64_t>(counts).to(box_options.device).unsqueeze(1));  // (n, W)
  const Tensor foreground = eq(match.labels, static_cast<double>(Matcher::kPositive));
  const Tensor background = eq(match.labels, static_cast<double>(Matcher::kNegative));
  const Tensor matched_one_hot =
      eq(match.matches.unsqueeze(2), narrow(positions, 0, 0, widest_gt).view({1, 1, widest_gt}));  // (n, W, Mw)
  const Tensor matched_class = sum(where(matched_one_hot, object_labels, shared_scalar(0.0, index_options)), {2});
  Candidates c;
  c.boxes = all_boxes.view({n, widest, d});
  c.matched_boxes = bmm(matched_one_hot.to(box_options.dtype), all_objects.view({n, widest_gt, d}));  // exact
  const Tensor ignored = shared_scalar(-1.0, index_options);
  const Tensor matched_labels =
      where(foreground, matched_class, where(background, shared_scalar(0.0, index_options), ignored));
  c.class_labels = where(real, matched_labels, ignored);
  return c;
}

// Every image's slots at once, from the padded candidates (n, W) and the sampler's masks: (n, K, ...) with
// K = min(batch, W). Image i's sample is its first K_i = min(batch, count_i) slots, exactly what a call for
// the image alone would fill: see sample_rois.
struct Slots {
  Tensor boxes, labels, valid;  // (n, K, D), (n, K), (n, K)
  Tensor target_boxes;          // (n, K, D): the matched object's box on foreground rows, the row's own elsewhere
  Tensor foreground_rows;       // (n, K, 1) bool
};

Slots fill_slots(const Candidates& all, const Tensor& sampled, const Tensor& positions, int64_t batch_size) {
  const TensorOptions index_options(kInt64, all.boxes.device());
  const int64_t widest = all.boxes.size(1), d = all.boxes.size(2);
  // Line each image's sampled candidates up in increasing index order: key = index for sampled candidates
  // and W + index for the others (padding is never sampled), so the K smallest keys are the sampled ones
  // first (at most min(batch, count_i) of them), then the others in index order. Keys are distinct: CPU and
  // CUDA sort them alike. Per image alone the others' keys would be count_i + index: the same order.
  const Tensor own_positions = narrow(positions, 0, 0, widest).unsqueeze(0);  // (1, W)
  const Tensor key = where(sampled, own_positions, add(own_positions, static_cast<double>(widest)));
  const ValuesIndices first = topk(key, std::min(batch_size, widest), 1, /*largest=*/false);
  Slots out;
  out.valid = lt(first.values, static_cast<double>(widest));
  // Gather boxes, matched boxes and labels of the slots at once (labels are small integers: exact as floats).
  const Tensor labels_as_boxes = all.class_labels.to(all.boxes.dtype()).unsqueeze(2);
  const Tensor table = cat({all.boxes, all.matched_boxes, labels_as_boxes}, 2);
  const Tensor rows = take_rows(table, first.indices);  // (n, K, 2 D + 1)
  out.boxes = slice(rows, 2, 0, d);
  out.labels = where(out.valid, select(rows, 2, 2 * d).to(kInt64), shared_scalar(0.0, index_options));
  // Regression targets on foreground rows only; the others encode the box against itself (0) and are then
  // zeroed (sample_rois), so a degenerate unused box cannot leave a NaN behind.
  out.foreground_rows = ge(out.labels, 1.0).unsqueeze(2);
  out.target_boxes = where(out.foreground_rows, slice(rows, 2, d, 2 * d), out.boxes);
  return out;
}

// Steps 2 and 3 of sample_rois for matched candidates (n, W): one sampler call for all images (labels padded
// with "ignored"; its random priorities make one host-to-device copy, not one per image), the slots of all
// images, their regression targets in one encode, and the rois (image, box) with image_ids (n) the image
// index of each row of the tables. Image i keeps its first min(K, candidates_i) slots; when every image keeps
// all K, the tables are the sample as they are, otherwise each output is cut per image and joined (one copy
// per image and output).
RoISample sample_and_fill(const Candidates& all, const Tensor& positions, const Tensor& image_ids,
                          const std::vector<int64_t>& candidates, const RoIHeadsOptions& options,
                          Generator* generator) {
  const BalancedPositiveNegativeSampler sampler(options.batch_size_per_image, options.positive_fraction);
  const BoxTypeCoder coder(options.box_type, options.box_coder_weights, options.box_coder_angle_weight,
                           options.rotated_offsets, options.rotated_edge_swap);
  const TensorOptions box_options = all.boxes.options(), index_options(kInt64, box_options.device);
  const SampledMasks sample = sampler(all.class_labels, generator);
  const Tensor sampled = where(sample.positive, sample.positive, sample.negative);  // positive or negative

  const Slots slots = fill_slots(all, sampled, positions, options.batch_size_per_image);
  const int64_t n = slots.boxes.size(0), k = slots.boxes.size(1);
  const Tensor image_column = image_ids.view({n, 1, 1}).expand({n, k, 1});
  const Tensor targets = where(slots.foreground_rows, coder.encode(slots.target_boxes, slots.boxes),
                               shared_scalar(0.0, box_options));
  std::vector<Tensor> tables = {cat({image_column, slots.boxes}, 2), slots.labels, targets, slots.valid};
  std::vector<int64_t> kept;
  for (int64_t c : candidates) kept.push_back(std::min(k, c));
  const bool ragged = std::any_of(kept.begin(), kept.end(), [&](int64_t slots_i) { return slots_i < k; });
  for (Tensor& table : tables) {
    if (!ragged) {
      table = table.flatten(0, 1);
      continue;
    }
    std::vector<Tensor> pieces;
    for (int64_t i = 0; i < n; ++i)
      pieces.push_back(narrow(select(table, 0, i), 0, 0, kept[static_cast<size_t>(i)]));
    table = cat(pieces, 0);
  }
  return {tables[0], tables[1], tables[2], tables[3]};
}

}  // namespace

RoISample sample_rois(const std::vector<Tensor>& proposals, const std::vector<Tensor>& gt_boxes,
                      const std::vector<Tensor>& gt_labels, const RoIHeadsOptions& options, Generator* generator) {
  const char* op = "sample_rois";
  detail::check_options(op, options);
  check_proposal_list(op, proposals);
  MINIDET_CHECK(proposals[0].size(1) == box_dim(options.box_type), op, ": expected proposals of shape (P, ",
                box_dim(options.box_type), ") ", box_layout(options.box_type), ", got ", proposals[0].sizes());
  detail::check_targets_shapes(op, proposals, gt_boxes, gt_labels);
  NoGradGuard no_grad;  // targets are constants of the loss; proposals are detached as in torchvision
  const Matcher matcher(options.fg_iou_threshold, options.bg_iou_threshold, /*allow_low_quality_matches=*/false);
  const TensorOptions box_options = proposals[0].options(), index_options(kInt64, box_options.device);

  // 1. Match every image's candidates. Images without any (no proposals, no objects) sample nothing.
  int64_t widest = 0;
  std::vector<size_t> images;
  for (size_t n = 0; n < proposals.size(); ++n) {
    const int64_t count = proposals[n].size(0) + gt_boxes[n].size(0);
    widest = std::max(widest, count);
    if (count > 0) images.push_back(n);
  }
  const int64_t d = proposals[0].size(1);
  if (images.empty())
    return {zeros({0, 1 + d}, box_options), zeros({0}, index_options), zeros({0, d}, box_options),
            zeros({0}, TensorOptions(kBool, box_options.device))};
  int64_t widest_gt = 1;
  for (size_t n : images) widest_gt = std::max(widest_gt, gt_boxes[n].size(0));
  // The one arange: 0..max(W, Mw)-1, sliced for every use.
  const Tensor positions = arange(static_cast<double>(std::max(widest, widest_gt)), index_options);
  const Candidates all =
      match_candidates(proposals, gt_boxes, gt_labels, images, widest, widest_gt, matcher, positions);

  // 2. and 3.: sampling, slots, targets; each image keeps its first min(batch, count) slots.
  std::vector<int64_t> kept;
  for (size_t i : images) kept.push_back(proposals[i].size(0) + gt_boxes[i].size(0));
  std::vector<double> image_ids;
  for (size_t i : images) image_ids.push_back(static_cast<double>(i));
  return sample_and_fill(all, positions, from_vector<double>(image_ids).to(box_options), kept, options, generator);
}

RoISample sample_rois_padded(const PaddedProposals& proposals, const std::vector<Tensor>& gt_boxes,
                             const std::vector<Tensor>& gt_labels, const RoIHeadsOptions& options,
                             Generator* generator) {
  const char* op = "sample_rois_padded";
  detail::check_options(op, options);
  const int64_t d = box_dim(options.box_type);
  // Each image's P slots as its proposals: the checks and the matching treat them as P candidates, and the
  // slots past the image's count are then made "ignored" on the device, so the host never reads a count.
  const std::vector<Tensor> slots = checked_slots(op, proposals, d, box_layout(options.box_type));
  const int64_t n = proposals.boxes.size(0), p = proposals.boxes.size(1);
  detail::check_targets_shapes(op, slots, gt_boxes, gt_labels);
  NoGradGuard no_grad;
  const Matcher matcher(options.fg_iou_threshold, options.bg_iou_threshold, /*allow_low_quality_matches=*/false);
  const TensorOptions box_options = proposals.boxes.options(), index_options(kInt64, box_options.device);
  int64_t widest_gt = 1;
  for (const Tensor& g : gt_boxes) widest_gt = std::max(widest_gt, g.size(0));
  const int64_t widest = p + widest_gt;
  if (n == 0)
    return {zeros({0, 1 + d}, box_options), zeros({0}, index_options), zeros({0, d}, box_options),
            zeros({0}, TensorOptions(kBool, box_options.device))};
  std::vector<size_t> images(static_cast<size_t>(n));
  for (size_t i = 0; i < images.size(); ++i) images[i] = i;
  const Tensor positions = arange(static_cast<double>(widest), index_options);
  Candidates all = match_candidates(slots, gt_boxes, gt_labels, images, widest, widest_gt, matcher, positions);
  // A candidate is a proposal of its image when its slot is below the count, an object (or padding, which
  // match_candidates already ignores) from slot P on.
  const Tensor slot = positions.unsqueeze(0);  // (1, W)
  const Tensor proposal = lt(slot, proposals.counts.unsqueeze(1));  // (n, W)
  const Tensor candidate = where(proposal, proposal, ge(slot, static_cast<double>(p)).expand({n, widest}));
  all.class_labels = where(candidate, all.class_labels, shared_scalar(-1.0, index_options));
  // Every image keeps all K slots: the rows past its sample are padding (valid false), as in the per-image
  // path when an image samples fewer than K, and the losses average over the valid rows only.
  const std::vector<int64_t> kept(static_cast<size_t>(n), widest);
  return sample_and_fill(all, positions, arange(static_cast<double>(n), box_options), kept, options, generator);
}

void check_roi_targets(const std::vector<Tensor>& gt_boxes, const std::vector<Tensor>& gt_labels,
                       int64_t num_classes) {
  const char* op = "RoIHeads";
  if (gt_boxes.empty()) return;
  NoGradGuard no_grad;
  // Per image: how many labels lie in 1..C and how many boxes are finite with x1 < x2 and y1 < y2, or for
  // rotated boxes with w > 0 and h > 0 (NaN fails every comparison). All images' counts travel to the host in
  // ONE copy: the one synchronisation.
  std::vector<Tensor> counts;
  const double infinity = std::numeric_limits<double>::infinity();
  for (size_t n = 0; n < gt_boxes.size(); ++n) {
    const Tensor& b = gt_boxes[n];
    const Tensor good_label = logical_and(ge(gt_labels[n], 1.0), le(gt_labels[n], static_cast<double>(num_classes)));
    const Tensor finite = lt(abs(b), infinity);
    const bool rotated = b.size(1) == 5;
    Tensor good_box = rotated ? logical_and(gt(select(b, 1, 2), 0.0), gt(select(b, 1, 3), 0.0))
                              : logical_and(lt(select(b, 1, 0), select(b, 1, 2)), lt(select(b, 1, 1), select(b, 1, 3)));
    for (int64_t j = 0; j < b.size(1); ++j) good_box = logical_and(good_box, select(finite, 1, j));
    counts.push_back(stack({sum(good_label), sum(good_box)}, 0));
  }
  const std::vector<int64_t> host = stack(counts, 0).to_vector<int64_t>();
  for (size_t n = 0; n < gt_boxes.size(); ++n) {
    const int64_t m = gt_boxes[n].size(0);
    if (host[2 * n] != m) {
      const std::vector<int64_t> values = gt_labels[n].to_vector<int64_t>();  // error path only
      const auto bad = std::find_if(values.begin(), values.end(), [&](int64_t v) { return v < 1 || v > num_classes; });
      MINIDET_CHECK(false, op, ": expected gt_labels[", n, "] in 1..", num_classes, " (0 is background), got ", *bad,
                    " at index ", bad - values.begin());
    }
    if (host[2 * n + 1] != m) {
      const std::vector<double> v = gt_boxes[n].to_vector<double>();  // error path only
      const int64_t d = gt_boxes[n].size(1);
      for (int64_t i = 0; i < m; ++i) {
        const double* r = v.data() + d * i;
        const bool finite = std::all_of(r, r + d, [](double x) { return std::isfinite(x); });
        if (d == 5) {
          MINIDET_CHECK(finite && r[2] > 0 && r[3] > 0, op, ": expected gt_boxes[", n,
                        "] finite with w > 0 and h > 0, got box ", i, " = (", r[0], ", ", r[1], ", ", r[2], ", ", r[3],
                        ", ", r[4], ")");
        } else {
          MINIDET_CHECK(finite && r[0] < r[2] && r[1] < r[3], op, ": expected gt_boxes[", n,
                        "] finite with x1 < x2 and y1 < y2, got box ", i, " = (", r[0], ", ", r[1], ", ", r[2], ", ",
                        r[3], ")");
        }
      }
    }
  }
}

}  // namespace minidet::models
