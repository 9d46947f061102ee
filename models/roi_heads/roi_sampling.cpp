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
#include "ops/elementwise/unary.h"
#include "ops/indexing/where.h"
#include "ops/matmul/matmul.h"
#include "ops/reduction/reduction.h"
#include "ops/shape/shape.h"

namespace minidet::models {

namespace {

Tensor logical_and(const Tensor& a, const Tensor& b) { return where(a, b, a); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return where(a, a, b); }

// The rows `index` (K) of `table` (B, W) as a one-hot product onehot(index) (K, B) @ table: exact (one term
// of 1 * value per output, the others 0 * finite value), and unlike index_select free of a host-side check
// of the indices, which on CUDA would cost a synchronisation per image.
Tensor take_rows(const Tensor& table, const Tensor& index) {
  const Tensor columns = arange(static_cast<double>(table.size(0)), TensorOptions(kInt64, table.device()));
  return mm(eq(index.unsqueeze(1), columns.unsqueeze(0)).to(table.dtype()), table);
}

// One image's slice of the sample.
struct ImageSample {
  Tensor boxes, labels, targets, valid;
};

ImageSample sample_image(const Tensor& proposals, const Tensor& gt_boxes, const Tensor& gt_labels,
                         const RoIHeadsOptions& options, const Matcher& matcher,
                         const BalancedPositiveNegativeSampler& sampler, const BoxCoder& coder, Generator* generator) {
  const TensorOptions index_options(kInt64, proposals.device());
  const Tensor boxes = cat({proposals, gt_boxes}, 0);  // the ground truth joins the candidates
  const int64_t count = boxes.size(0), num_gt = gt_boxes.size(0);

  // Each candidate's class: its matched object's label when foreground, 0 background, -1 ignored.
  const MatchResult match = matcher(box_iou(gt_boxes, boxes));
  const Tensor foreground = eq(match.labels, static_cast<double>(Matcher::kPositive));
  const Tensor background = eq(match.labels, static_cast<double>(Matcher::kNegative));
  Tensor matched_class = zeros({count}, index_options), matched_boxes = boxes;
  if (num_gt > 0) {
    const Tensor gt_columns = arange(static_cast<double>(num_gt), index_options);
    const Tensor matched_one_hot = eq(match.matches.unsqueeze(1), gt_columns.unsqueeze(0));  // (B, M)
    matched_class = sum(where(matched_one_hot, gt_labels.unsqueeze(0), zeros({}, index_options)), {1});
    matched_boxes = mm(matched_one_hot.to(boxes.dtype()), gt_boxes);
  }
  const Tensor class_labels = where(foreground, matched_class,
                                    where(background, zeros({}, index_options), full({}, -1.0, index_options)));

  // Sample, then line the sampled candidates up in increasing index order in K = min(batch, B) slots:
  // key = index for sampled candidates and B + index for the others, so the K smallest keys are the sampled
  // ones first (there are at most K), then padding. Keys are distinct: CPU and CUDA sort them alike.
  const SampledMasks sample = sampler(class_labels, generator);
  const Tensor positions = arange(static_cast<double>(count), index_options);
  const Tensor sampled = logical_or(sample.positive, sample.negative);
  const Tensor key = where(sampled, positions, add(positions, static_cast<double>(count)));
  const int64_t slots = std::min(options.batch_size_per_image, count);
  const ValuesIndices first = topk(key, slots, 0, /*largest=*/false);
  const Tensor valid = lt(first.values, static_cast<double>(count));

  // Gather boxes, matched boxes and labels of the slots at once (labels are small integers: exact as floats).
  const Tensor table = cat({boxes, matched_boxes, class_labels.to(boxes.dtype()).unsqueeze(1)}, 1);  // (B, 9)
  const Tensor rows = take_rows(table, first.indices);                                              // (K, 9)
  ImageSample out;
  out.boxes = slice(rows, 1, 0, 4);
  out.labels = where(valid, select(rows, 1, 8).to(kInt64), zeros({}, index_options));
  out.valid = valid;
  // Regression targets on foreground rows only; the others encode the box against itself (0) and are then
  // zeroed, so a degenerate unused box cannot leave a NaN behind.
  const Tensor foreground_rows = ge(out.labels, 1.0).unsqueeze(1);
  const Tensor target_boxes = where(foreground_rows, slice(rows, 1, 4, 8), out.boxes);
  out.targets = where(foreground_rows, coder.encode(target_boxes, out.boxes), zeros({}, boxes.options()));
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
  const TensorOptions box_options = proposals[0].options();

  std::vector<Tensor> rois, labels, targets, valid;
  for (size_t n = 0; n < proposals.size(); ++n) {
    if (proposals[n].size(0) + gt_boxes[n].size(0) == 0) continue;  // nothing to sample in this image
    const ImageSample s = sample_image(proposals[n].detach(), gt_boxes[n].detach(), gt_labels[n], options, matcher,
                                       sampler, coder, generator);
    rois.push_back(cat({full({s.boxes.size(0), 1}, static_cast<double>(n), box_options), s.boxes}, 1));
    labels.push_back(s.labels);
    targets.push_back(s.targets);
    valid.push_back(s.valid);
  }
  if (rois.empty())
    return {zeros({0, 5}, box_options), zeros({0}, TensorOptions(kInt64, box_options.device)),
            zeros({0, 4}, box_options), zeros({0}, TensorOptions(kBool, box_options.device))};
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
