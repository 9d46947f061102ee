// sample_rois and check_roi_targets: the training targets of the box head (math in roi_heads.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "models/box_coder/box_coder.h"
#include "models/matcher/matcher.h"
#include "models/roi_heads/roi_heads.h"
#include "models/roi_heads/roi_inputs.h"
#include "models/sampler/sampler.h"
#include "ops/boxes/box_iou.h"
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

Tensor logical_and(const Tensor& a, const Tensor& b) { return where(a, b, a); }

// The rows `index` (K) of `table` (B, W) as a one-hot product onehot(index) (K, B) @ table: exact (one term
// of 1 * value per output, the others 0 * finite value), and unlike index_select free of a host-side check
// of the indices, which on CUDA would cost a synchronisation per image. positions: 0..B-1 on the device.
Tensor take_rows(const Tensor& table, const Tensor& index, const Tensor& positions) {
  return mm(eq(index.unsqueeze(1), positions.unsqueeze(0)).to(table.dtype()), table);
}

// Candidates (proposals, then objects) and what they matched: of one image, (B) and (B, 4), or of all images
// padded to W, (n, W) and (n, W, 4).
struct Candidates {
  Tensor boxes;          // (B, 4)
  Tensor class_labels;   // (B) int64: the matched object's label if foreground, 0 background, -1 ignored
  Tensor matched_boxes;  // (B, 4): the matched object's box (anything on rows that are not foreground)
};

// Every image's candidates matched at once: a fixed number of kernels for any batch, where one Matcher call
// per image is some 25 kernels each. Candidates are padded to W, the most any image has, and objects to
// the most any image has, Mw, both with the empty box (0, 0, 0, 0), whose IoU with anything is 0:
//   IoU        the (n Mw, n W) IoU of all objects with all candidates, of which image i's block (i, i) is
//              read in place (as_strided): n^2 Mw W small products instead of n calls;
//   Matcher    a padded object never beats a real one (ties at 0 go to the first row, a real one) and an
//              image without objects is all background, as a call per image gives;
//   labels     padded candidates are -1 (ignored: never sampled), which is also how the sampler's one call
//              for all images wants them.
// Returns (n, W) labels and (n, W, 4) boxes and matched boxes; image i's candidates are the first count_i.
Candidates match_candidates(const std::vector<Tensor>& proposals, const std::vector<Tensor>& gt_boxes,
                            const std::vector<Tensor>& gt_labels, const std::vector<size_t>& images, int64_t widest,
                            const Matcher& matcher, const Tensor& positions) {
  const TensorOptions box_options = proposals[0].options(), index_options(kInt64, box_options.device);
  const int64_t n = static_cast<int64_t>(images.size());
  int64_t widest_gt = 1;
  for (size_t i : images) widest_gt = std::max(widest_gt, gt_boxes[i].size(0));
  const Tensor empty_boxes = zeros({std::max(widest, widest_gt), 4}, box_options);
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
  const Tensor all_boxes = cat(boxes, 0), all_objects = cat(objects, 0);  // (n W, 4), (n Mw, 4)
  const Tensor object_labels = cat(labels, 0).view({n, 1, widest_gt});
  // Image i's block of the IoU matrix: rows i Mw.., columns i W..; one step along i moves Mw rows and W columns.
  const Tensor iou = box_iou(all_objects, all_boxes);
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
  c.boxes = all_boxes.view({n, widest, 4});
  c.matched_boxes = bmm(matched_one_hot.to(box_options.dtype), all_objects.view({n, widest_gt, 4}));  // exact
  const Tensor ignored = shared_scalar(-1.0, index_options);
  const Tensor matched_labels =
      where(foreground, matched_class, where(background, shared_scalar(0.0, index_options), ignored));
  c.class_labels = where(real, matched_labels, ignored);
  return c;
}

// One image's slice of the sample, from its candidates and its row of the sampler's masks. The regression
// targets are encoded for the whole batch at once (sample_rois): the box coder is some twenty elementwise
// kernels, the same for 8 rows or 4,096.
struct ImageSample {
  Tensor boxes, labels, valid;
  Tensor target_boxes;     // (K, 4): the matched object's box on foreground rows, the row's own box elsewhere
  Tensor foreground_rows;  // (K, 1) bool
};

ImageSample fill_slots(const Candidates& c, const Tensor& sampled, const Tensor& positions,
                       const RoIHeadsOptions& options) {
  const TensorOptions index_options(kInt64, c.boxes.device());
  const int64_t count = c.boxes.size(0);
  // Line the sampled candidates up in increasing index order in K = min(batch, B) slots: key = index for
  // sampled candidates and B + index for the others, so the K smallest keys are the sampled ones first (there
  // are at most K), then padding. Keys are distinct: CPU and CUDA sort them alike.
  const Tensor own_positions = narrow(positions, 0, 0, count);
  const Tensor key = where(sampled, own_positions, add(own_positions, static_cast<double>(count)));
  const int64_t slots = std::min(options.batch_size_per_image, count);
  const ValuesIndices first = topk(key, slots, 0, /*largest=*/false);
  const Tensor valid = lt(first.values, static_cast<double>(count));

  // Gather boxes, matched boxes and labels of the slots at once (labels are small integers: exact as floats).
  const Tensor table = cat({c.boxes, c.matched_boxes, c.class_labels.to(c.boxes.dtype()).unsqueeze(1)}, 1);
  const Tensor rows = take_rows(table, first.indices, own_positions);  // (K, 9)
  ImageSample out;
  out.boxes = slice(rows, 1, 0, 4);
  out.labels = where(valid, select(rows, 1, 8).to(kInt64), shared_scalar(0.0, index_options));
  out.valid = valid;
  // Regression targets on foreground rows only; the others encode the box against itself (0) and are then
  // zeroed (sample_rois), so a degenerate unused box cannot leave a NaN behind.
  out.foreground_rows = ge(out.labels, 1.0).unsqueeze(1);
  out.target_boxes = where(out.foreground_rows, slice(rows, 1, 4, 8), out.boxes);
  return out;
}

}  // namespace

RoISample sample_rois(const std::vector<Tensor>& proposals, const std::vector<Tensor>& gt_boxes,
                      const std::vector<Tensor>& gt_labels, const RoIHeadsOptions& options, Generator* generator) {
  const char* op = "sample_rois";
  detail::check_options(op, options);
  detail::check_proposals(op, proposals);
  detail::check_targets_shapes(op, proposals, gt_boxes, gt_labels);
  NoGradGuard no_grad;  // targets are constants of the loss; proposals are detached as in torchvision
  const Matcher matcher(options.fg_iou_threshold, options.bg_iou_threshold, /*allow_low_quality_matches=*/false);
  const BalancedPositiveNegativeSampler sampler(options.batch_size_per_image, options.positive_fraction);
  const BoxCoder coder(options.box_coder_weights);
  const TensorOptions box_options = proposals[0].options(), index_options(kInt64, box_options.device);

  // 1. Match every image's candidates. Images without any (no proposals, no objects) sample nothing.
  int64_t widest = 0;
  std::vector<size_t> images;
  for (size_t n = 0; n < proposals.size(); ++n) {
    const int64_t count = proposals[n].size(0) + gt_boxes[n].size(0);
    widest = std::max(widest, count);
    if (count > 0) images.push_back(n);
  }
  if (images.empty())
    return {zeros({0, 5}, box_options), zeros({0}, index_options), zeros({0, 4}, box_options),
            zeros({0}, TensorOptions(kBool, box_options.device))};
  int64_t widest_gt = 1;
  for (size_t n : images) widest_gt = std::max(widest_gt, gt_boxes[n].size(0));
  // The one arange: 0..max(W, Mw)-1, sliced for every use.
  const Tensor positions = arange(static_cast<double>(std::max(widest, widest_gt)), index_options);
  const Candidates all = match_candidates(proposals, gt_boxes, gt_labels, images, widest, matcher, positions);

  // 2. One sampler call for all images (labels padded with "ignored"): its random priorities make one
  // host-to-device copy, not one per image.
  const SampledMasks sample = sampler(all.class_labels, generator);
  const Tensor sampled = where(sample.positive, sample.positive, sample.negative);  // positive or negative

  // 3. Each image's slots, then the batch, and the batch's regression targets in one encode.
  std::vector<Tensor> rois, boxes, labels, target_boxes, foreground_rows, valid;
  for (size_t i = 0; i < images.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i);
    const int64_t count = proposals[images[i]].size(0) + gt_boxes[images[i]].size(0);
    const auto own = [&](const Tensor& t) { return narrow(select(t, 0, row), 0, 0, count); };  // views
    const Candidates c{own(all.boxes), own(all.class_labels), own(all.matched_boxes)};
    const ImageSample s = fill_slots(c, narrow(select(sampled, 0, row), 0, 0, count), positions, options);
    rois.push_back(cat({full({s.boxes.size(0), 1}, static_cast<double>(images[i]), box_options), s.boxes}, 1));
    boxes.push_back(s.boxes);
    labels.push_back(s.labels);
    target_boxes.push_back(s.target_boxes);
    foreground_rows.push_back(s.foreground_rows);
    valid.push_back(s.valid);
  }
  const Tensor targets = where(cat(foreground_rows, 0), coder.encode(cat(target_boxes, 0), cat(boxes, 0)),
                               shared_scalar(0.0, box_options));
  return {cat(rois, 0), cat(labels, 0), targets, cat(valid, 0)};
}

void check_roi_targets(const std::vector<Tensor>& gt_boxes, const std::vector<Tensor>& gt_labels,
                       int64_t num_classes) {
  const char* op = "RoIHeads";
  if (gt_boxes.empty()) return;
  NoGradGuard no_grad;
  // Per image: how many labels lie in 1..C and how many boxes are finite with x1 < x2 and y1 < y2 (NaN fails
  // every comparison). All images' counts travel to the host in ONE copy: the one synchronisation.
  std::vector<Tensor> counts;
  const double infinity = std::numeric_limits<double>::infinity();
  for (size_t n = 0; n < gt_boxes.size(); ++n) {
    const Tensor& b = gt_boxes[n];
    const Tensor good_label = logical_and(ge(gt_labels[n], 1.0), le(gt_labels[n], static_cast<double>(num_classes)));
    const Tensor finite = lt(abs(b), infinity);
    Tensor good_box = logical_and(lt(select(b, 1, 0), select(b, 1, 2)), lt(select(b, 1, 1), select(b, 1, 3)));
    for (int64_t j = 0; j < 4; ++j) good_box = logical_and(good_box, select(finite, 1, j));
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
      for (int64_t i = 0; i < m; ++i) {
        const double* r = v.data() + 4 * i;
        const bool ok = std::isfinite(r[0]) && std::isfinite(r[1]) && std::isfinite(r[2]) && std::isfinite(r[3]) &&
                        r[0] < r[2] && r[1] < r[3];
        MINIDET_CHECK(ok, op, ": expected gt_boxes[", n, "] finite with x1 < x2 and y1 < y2, got box ", i, " = (", r[0],
                      ", ", r[1], ", ", r[2], ", ", r[3], ")");
      }
    }
  }
}

}  // namespace minidet::models
