// The steps below are numbered as in coco_eval.h.
#include "data/eval/coco_eval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <unordered_map>

#include "core/error.h"
#include "data/eval/check_inputs.h"
#include "data/eval/overlap.h"

namespace minidet::data {

CocoEvalParams::CocoEvalParams() {
  // numpy's linspace: start + i * step, with the last value set to the end exactly.
  const double iou_step = (0.95 - 0.5) / 9;
  for (int i = 0; i < 10; ++i) iou_thresholds.push_back(i == 9 ? 0.95 : 0.5 + i * iou_step);
  const double recall_step = 1.0 / 100;
  for (int i = 0; i <= 100; ++i) recall_thresholds.push_back(i == 100 ? 1.0 : i * recall_step);
}

namespace {

// numpy's np.spacing(1): keeps precision finite when a prefix has no counted detection.
constexpr double kEpsilon = 2.220446049250313e-16;

// Step 2's outcome for one (category, area range, image).
struct ImageEval {
  bool present = false;          // false when the image has neither objects nor detections of the category
  std::vector<double> scores;    // D detections, highest score first
  std::vector<uint8_t> matched;  // T x D
  std::vector<uint8_t> ignored;  // T x D
  int64_t regular_objects = 0;   // objects that are not ignored
};

struct Cell {  // one (image, category): its objects and detections, as indices
  std::vector<size_t> objects;
  std::vector<size_t> detections;  // sorted by score and cut (step 1)
  std::vector<double> ious;        // detections x objects
};

ImageEval evaluate_image(const Cell& cell, const GroundTruth& truth, const std::vector<Detection>& detections,
                         const CocoEvalParams& params, const std::array<double, 2>& area_range) {
  ImageEval eval;
  const size_t num_objects = cell.objects.size(), num_detections = cell.detections.size();
  if (num_objects == 0 && num_detections == 0) return eval;
  eval.present = true;
  const size_t num_thresholds = params.iou_thresholds.size();
  auto outside = [&](double area) { return area < area_range[0] || area > area_range[1]; };

  std::vector<uint8_t> object_ignored(num_objects);
  for (size_t g = 0; g < num_objects; ++g) {
    const GroundTruthObject& object = truth.objects[cell.objects[g]];
    object_ignored[g] = object.iscrowd || outside(object.area);
    eval.regular_objects += object_ignored[g] ? 0 : 1;
  }
  std::vector<size_t> object_order(num_objects);  // regular objects first, each group in file order
  std::iota(object_order.begin(), object_order.end(), 0);
  std::stable_sort(object_order.begin(), object_order.end(),
                   [&](size_t a, size_t b) { return object_ignored[a] < object_ignored[b]; });

  for (size_t d = 0; d < num_detections; ++d) eval.scores.push_back(detections[cell.detections[d]].score);
  eval.matched.assign(num_thresholds * num_detections, 0);
  eval.ignored.assign(num_thresholds * num_detections, 0);
  for (size_t t = 0; t < num_thresholds && num_objects > 0; ++t) {
    std::vector<uint8_t> object_taken(num_objects, 0);
    for (size_t d = 0; d < num_detections; ++d) {
      double best_iou = std::min(params.iou_thresholds[t], 1 - 1e-10);
      int64_t best = -1;
      for (size_t g : object_order) {
        const bool crowd = truth.objects[cell.objects[g]].iscrowd;
        if (object_taken[g] && !crowd) continue;
        // Holding a regular object, stop at the first ignored one: they come after all regular ones.
        if (best >= 0 && !object_ignored[best] && object_ignored[g]) break;
        const double iou = cell.ious[d * num_objects + g];
        if (iou < best_iou) continue;
        best_iou = iou;
        best = static_cast<int64_t>(g);
      }
      if (best < 0) continue;
      eval.ignored[t * num_detections + d] = object_ignored[best];
      eval.matched[t * num_detections + d] = 1;
      object_taken[best] = 1;
    }
  }
  for (size_t d = 0; d < num_detections; ++d) {
    if (!outside(eval_detail::Overlap::detection_area(detections[cell.detections[d]]))) continue;
    for (size_t t = 0; t < num_thresholds; ++t)
      if (!eval.matched[t * num_detections + d]) eval.ignored[t * num_detections + d] = 1;
  }
  return eval;
}

double mean_of_valid(const std::vector<double>& values) {
  double sum = 0;
  int64_t count = 0;
  for (double value : values)
    if (value > -1) {
      sum += value;
      ++count;
    }
  return count > 0 ? sum / static_cast<double>(count) : -1;
}

size_t index_of(const std::vector<double>& values, double wanted) {
  for (size_t i = 0; i < values.size(); ++i)
    if (std::abs(values[i] - wanted) < 1e-9) return i;
  MINIDET_FAIL("evaluate_coco: no IoU threshold ", wanted);
}

}  // namespace

double CocoEvalResult::precision_at(size_t t, size_t r, size_t k, size_t a, size_t m) const {
  const size_t R = params.recall_thresholds.size(), K = category_ids.size(), A = params.area_ranges.size(),
               M = params.max_detections.size();
  return precision[(((t * R + r) * K + k) * A + a) * M + m];
}

double CocoEvalResult::recall_at(size_t t, size_t k, size_t a, size_t m) const {
  const size_t K = category_ids.size(), A = params.area_ranges.size(), M = params.max_detections.size();
  return recall[((t * K + k) * A + a) * M + m];
}

double CocoEvalResult::category_ap(size_t k) const {
  std::vector<double> values;
  for (size_t t = 0; t < params.iou_thresholds.size(); ++t)
    for (size_t r = 0; r < params.recall_thresholds.size(); ++r)
      values.push_back(precision_at(t, r, k, 0, params.max_detections.size() - 1));
  return mean_of_valid(values);
}

CocoEvalResult evaluate_coco(const GroundTruth& truth, const std::vector<Detection>& detections) {
  eval_detail::check_eval_inputs(truth, detections, "evaluate_coco");
  const eval_detail::Overlap overlap(truth, detections);
  CocoEvalResult result;
  result.rotated_iou = overlap.rotated();
  const CocoEvalParams& params = result.params;
  std::vector<int64_t> image_ids = truth.image_ids;
  std::sort(image_ids.begin(), image_ids.end());
  std::vector<size_t> category_order(truth.category_ids.size());
  std::iota(category_order.begin(), category_order.end(), 0);
  std::sort(category_order.begin(), category_order.end(),
            [&](size_t a, size_t b) { return truth.category_ids[a] < truth.category_ids[b]; });
  for (size_t k : category_order) {
    result.category_ids.push_back(truth.category_ids[k]);
    result.category_names.push_back(truth.category_names[k]);
  }
  const size_t I = image_ids.size(), K = result.category_ids.size(), T = params.iou_thresholds.size(),
               R = params.recall_thresholds.size(), A = params.area_ranges.size(), M = params.max_detections.size();
  std::unordered_map<int64_t, size_t> image_index, category_index;
  for (size_t i = 0; i < I; ++i) image_index[image_ids[i]] = i;
  for (size_t k = 0; k < K; ++k) category_index[result.category_ids[k]] = k;

  // Step 1: group by (category, image), keeping file order, then sort and cut the detections.
  std::vector<Cell> cells(K * I);
  for (size_t o = 0; o < truth.objects.size(); ++o)
    cells[category_index.at(truth.objects[o].category_id) * I + image_index.at(truth.objects[o].image_id)]
        .objects.push_back(o);
  for (size_t d = 0; d < detections.size(); ++d)
    cells[category_index.at(detections[d].category_id) * I + image_index.at(detections[d].image_id)]
        .detections.push_back(d);
  const size_t max_kept = static_cast<size_t>(params.max_detections.back());
  for (Cell& cell : cells) {
    std::stable_sort(cell.detections.begin(), cell.detections.end(),
                     [&](size_t a, size_t b) { return detections[a].score > detections[b].score; });
    if (cell.detections.size() > max_kept) cell.detections.resize(max_kept);
    for (size_t d : cell.detections)
      for (size_t o : cell.objects) cell.ious.push_back(overlap(detections[d], truth.objects[o]));
  }

  // Step 2, for every (category, area range, image).
  std::vector<ImageEval> evals(K * A * I);
  for (size_t k = 0; k < K; ++k)
    for (size_t a = 0; a < A; ++a)
      for (size_t i = 0; i < I; ++i)
        evals[(k * A + a) * I + i] = evaluate_image(cells[k * I + i], truth, detections, params, params.area_ranges[a]);

  // Step 3.
  result.precision.assign(T * R * K * A * M, -1);
  result.recall.assign(T * K * A * M, -1);
  for (size_t k = 0; k < K; ++k)
    for (size_t a = 0; a < A; ++a)
      for (size_t m = 0; m < M; ++m) {
        const size_t max_detections = static_cast<size_t>(params.max_detections[m]);
        struct Pooled {
          const ImageEval* eval;
          size_t d;
        };
        std::vector<Pooled> pooled;
        int64_t regular_objects = 0;
        bool any_present = false;
        for (size_t i = 0; i < I; ++i) {
          const ImageEval& eval = evals[(k * A + a) * I + i];
          if (!eval.present) continue;
          any_present = true;
          regular_objects += eval.regular_objects;
          for (size_t d = 0; d < std::min(max_detections, eval.scores.size()); ++d) pooled.push_back({&eval, d});
        }
        if (!any_present || regular_objects == 0) continue;
        std::stable_sort(pooled.begin(), pooled.end(), [](const Pooled& x, const Pooled& y) {
          return x.eval->scores[x.d] > y.eval->scores[y.d];
        });
        const size_t count = pooled.size();
        for (size_t t = 0; t < T; ++t) {
          std::vector<double> precision(count), recall(count);
          double true_positives = 0, false_positives = 0;
          for (size_t n = 0; n < count; ++n) {
            const ImageEval& eval = *pooled[n].eval;
            const size_t slot = t * eval.scores.size() + pooled[n].d;
            if (!eval.ignored[slot]) (eval.matched[slot] ? true_positives : false_positives) += 1;
            recall[n] = true_positives / static_cast<double>(regular_objects);
            precision[n] = true_positives / (false_positives + true_positives + kEpsilon);
          }
          result.recall[((t * K + k) * A + a) * M + m] = count > 0 ? recall.back() : 0;
          for (size_t n = count; n-- > 1;) precision[n - 1] = std::max(precision[n - 1], precision[n]);
          for (size_t r = 0; r < R; ++r) {
            // The first detection whose recall reaches the recall point (numpy's searchsorted, side left).
            const size_t n = std::lower_bound(recall.begin(), recall.end(), params.recall_thresholds[r]) - recall.begin();
            result.precision[(((t * R + r) * K + k) * A + a) * M + m] = n < count ? precision[n] : 0;
          }
        }
      }

  // Step 4.
  auto average_precision = [&](int iou_index, size_t a, size_t m) {
    std::vector<double> values;
    for (size_t t = 0; t < T; ++t)
      if (iou_index < 0 || static_cast<size_t>(iou_index) == t)
        for (size_t r = 0; r < R; ++r)
          for (size_t k = 0; k < K; ++k) values.push_back(result.precision_at(t, r, k, a, m));
    return mean_of_valid(values);
  };
  auto average_recall = [&](size_t a, size_t m) {
    std::vector<double> values;
    for (size_t t = 0; t < T; ++t)
      for (size_t k = 0; k < K; ++k) values.push_back(result.recall_at(t, k, a, m));
    return mean_of_valid(values);
  };
  const int iou50 = static_cast<int>(index_of(params.iou_thresholds, 0.5));
  const int iou75 = static_cast<int>(index_of(params.iou_thresholds, 0.75));
  const size_t last = M - 1;
  result.stats = {average_precision(-1, 0, last), average_precision(iou50, 0, last), average_precision(iou75, 0, last),
                  average_precision(-1, 1, last), average_precision(-1, 2, last), average_precision(-1, 3, last),
                  average_recall(0, 0),           average_recall(0, 1),           average_recall(0, last),
                  average_recall(1, last),        average_recall(2, last),        average_recall(3, last)};
  return result;
}

std::string format_coco_summary(const CocoEvalResult& result) {
  struct Line {
    bool precision;
    const char* iou;
    const char* area;
    int max_detections;
  };
  const Line lines[12] = {{true, "0.50:0.95", "all", 100},   {true, "0.50", "all", 100},
                          {true, "0.75", "all", 100},        {true, "0.50:0.95", "small", 100},
                          {true, "0.50:0.95", "medium", 100}, {true, "0.50:0.95", "large", 100},
                          {false, "0.50:0.95", "all", 1},    {false, "0.50:0.95", "all", 10},
                          {false, "0.50:0.95", "all", 100},  {false, "0.50:0.95", "small", 100},
                          {false, "0.50:0.95", "medium", 100}, {false, "0.50:0.95", "large", 100}};
  std::string text;
  char buffer[160];
  for (int i = 0; i < 12; ++i) {
    const Line& line = lines[i];
    std::snprintf(buffer, sizeof(buffer), " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f\n",
                  line.precision ? "Average Precision" : "Average Recall", line.precision ? "(AP)" : "(AR)",
                  line.iou, line.area, line.max_detections, result.stats[i]);
    text += buffer;
  }
  return text;
}

std::string format_coco_per_category(const CocoEvalResult& result) {
  std::string text;
  char buffer[160];
  for (size_t k = 0; k < result.category_ids.size(); ++k) {
    std::snprintf(buffer, sizeof(buffer), "  category %4lld %-20s AP@[.5:.95] = %6.3f\n",
                  static_cast<long long>(result.category_ids[k]), result.category_names[k].c_str(),
                  result.category_ap(k));
    text += buffer;
  }
  return text;
}

}  // namespace minidet::data
