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

// One image's candidates (its proposals, then its objects) and what they matched.
struct Candidates {
  Tensor boxes;          // (B, 4)
  Tensor class_labels;   // (B) int64: the matched object's label if foreground, 0 background, -1 ignored
  Tensor matched_boxes;  // (B, 4): the matched object's box (the candidate itself when there is no object)
};

// positions: 0..(at least B)-1 on the device, sliced here instead of a fresh arange per use: on CUDA every
// arange is a host-to-device copy, which waits for the queued work (see the header).
Candidates match_candidates(const Tensor& proposals, const Tensor& gt_boxes, const Tensor& gt_labels,
                            const Matcher& matcher, const Tensor& positions) {
  const TensorOptions index_options(kInt64, proposals.device());
  Candidates c;
  c.boxes = cat({proposals, gt_boxes}, 0);  // the ground truth joins the candidates
  const int64_t count = c.boxes.size(0), num_gt = gt_boxes.size(0);
  const MatchResult match = matcher(box_iou(gt_boxes, c.boxes));
  const Tensor foreground = eq(match.labels, static_cast<double>(Matcher::kPositive));
  const Tensor background = eq(match.labels, static_cast<double>(Matcher::kNegative));
  Tensor matched_class = zeros({count}, index_options);
  c.matched_boxes = c.boxes;
  if (num_gt > 0) {
    const Tensor matched_one_hot = eq(match.matches.unsqueeze(1), narrow(positions, 0, 0, num_gt).unsqueeze(0));
    matched_class = sum(where(matched_one_hot, gt_labels.unsqueeze(0), shared_scalar(0.0, index_options)), {1});
    c.matched_boxes = mm(matched_one_hot.to(c.boxes.dtype()), gt_boxes);  // (B, M) @ (M, 4), exact
  }
  c.class_labels = where(foreground, matched_class,
                         where(background, shared_scalar(0.0, index_options), shared_scalar(-1.0, index_options)));
  return c;
}

// One image's slice of the sample, from its candidates and its row of the sampler's masks.
struct ImageSample {
  Tensor boxes, labels, targets, valid;
};

ImageSample fill_slots(const Candidates& c, const Tensor& sampled, const Tensor& positions,
                       const RoIHeadsOptions& options, const BoxCoder& coder) {
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
  // zeroed, so a degenerate unused box cannot leave a NaN behind.
  const Tensor foreground_rows = ge(out.labels, 1.0).unsqueeze(1);
  const Tensor target_boxes = where(foreground_rows, slice(rows, 1, 4, 8), out.boxes);
  out.targets = where(foreground_rows, coder.encode(target_boxes, out.boxes), shared_scalar(0.0, c.boxes.options()));
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

  // 1. Match each image's candidates. Images without any (no proposals, no objects) sample nothing.
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
  const Tensor positions = arange(static_cast<double>(widest), index_options);  // the one arange: 0..widest-1
  std::vector<Candidates> candidates;
  std::vector<Tensor> padded_labels;
  for (size_t n : images) {
    candidates.push_back(
        match_candidates(proposals[n].detach(), gt_boxes[n].detach(), gt_labels[n], matcher, positions));
    const Tensor& labels = candidates.back().class_labels;
    // Padded to the widest image with -1 (ignored: never sampled), so one sampler call serves the batch.
    padded_labels.push_back(cat({labels, full({widest - labels.size(0)}, -1.0, index_options)}, 0));
  }

  // 2. One sampler call for all images: its random priorities make one host-to-device copy, not one per image.
  const SampledMasks sample = sampler(stack(padded_labels, 0), generator);
  const Tensor sampled = where(sample.positive, sample.positive, sample.negative);  // positive or negative

  // 3. Each image's slots, then the batch.
  std::vector<Tensor> rois, labels, targets, valid;
  for (size_t i = 0; i < images.size(); ++i) {
    const Candidates& c = candidates[i];
    const ImageSample s = fill_slots(c, narrow(select(sampled, 0, static_cast<int64_t>(i)), 0, 0, c.boxes.size(0)),
                                     positions, options, coder);
    rois.push_back(cat({full({s.boxes.size(0), 1}, static_cast<double>(images[i]), box_options), s.boxes}, 1));
    labels.push_back(s.labels);
    targets.push_back(s.targets);
    valid.push_back(s.valid);
  }
  return {cat(rois, 0), cat(labels, 0), cat(targets, 0), cat(valid, 0)};
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
