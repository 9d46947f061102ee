#include "data/eval/voc_eval.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

#include "core/error.h"
#include "data/eval/check_inputs.h"
#include "data/eval/overlap.h"

namespace minidet::data {

double voc_average_precision(const std::vector<double>& recall, const std::vector<double>& precision,
                             bool use_11_point) {
  MINIDET_CHECK(recall.size() == precision.size(), "voc_average_precision: ", recall.size(), " recall values but ",
                precision.size(), " precision values");
  if (use_11_point) {
    double sum = 0;
    for (int step = 0; step <= 10; ++step) {
      const double threshold = step * 0.1;  // as numpy's arange(0, 1.1, 0.1) computes them
      double best = 0;
      for (size_t k = 0; k < recall.size(); ++k)
        if (recall[k] >= threshold) best = std::max(best, precision[k]);
      sum += best;
    }
    return sum / 11;
  }
  // Sentinels: recall runs from 0 to 1, and precision is 0 past the last detection.
  std::vector<double> r(recall.size() + 2), p(precision.size() + 2);
  r.front() = 0;
  r.back() = 1;
  p.front() = 0;
  p.back() = 0;
  std::copy(recall.begin(), recall.end(), r.begin() + 1);
  std::copy(precision.begin(), precision.end(), p.begin() + 1);
  for (size_t i = p.size() - 1; i > 0; --i) p[i - 1] = std::max(p[i - 1], p[i]);  // the envelope
  double area = 0;
  for (size_t i = 1; i < r.size(); ++i)
    if (r[i] != r[i - 1]) area += (r[i] - r[i - 1]) * p[i];
  return area;
}

VocResult evaluate_voc(const GroundTruth& truth, const std::vector<Detection>& detections, const VocOptions& options) {
  eval_detail::check_eval_inputs(truth, detections, "evaluate_voc");
  const eval_detail::Overlap overlap(truth, detections);
  VocResult result;
  result.rotated_iou = overlap.rotated();
  double ap_sum = 0;
  int64_t classes_with_objects = 0;
  for (size_t k = 0; k < truth.category_ids.size(); ++k) {
    const int64_t category = truth.category_ids[k];
    VocClassResult& row = result.classes.emplace_back();
    row.category_id = category;
    row.name = truth.category_names[k];

    // This class's objects per image, and whether each regular one is taken yet.
    std::map<int64_t, std::vector<const GroundTruthObject*>> objects_in_image;
    for (const GroundTruthObject& object : truth.objects)
      if (object.category_id == category) {
        objects_in_image[object.image_id].push_back(&object);
        if (!object.iscrowd) ++row.num_ground_truth;
      }
    std::map<const GroundTruthObject*, bool> taken;

    std::vector<const Detection*> ranked;
    for (const Detection& detection : detections)
      if (detection.category_id == category) ranked.push_back(&detection);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const Detection* a, const Detection* b) { return a->score > b->score; });
    row.num_detections = static_cast<int64_t>(ranked.size());

    int64_t true_positives = 0, false_positives = 0;
    for (const Detection* detection : ranked) {
      const GroundTruthObject* best = nullptr;
      double best_iou = -1;
      bool covers_crowd = false;
      for (const GroundTruthObject* object : objects_in_image[detection->image_id]) {
        const double iou = overlap(*detection, *object);  // for a crowd region: the part of the detection in it
        if (object->iscrowd) {
          covers_crowd |= iou > options.iou_threshold;
          continue;
        }
        if (iou > best_iou) {
          best_iou = iou;
          best = object;
        }
      }
      if (best != nullptr && best_iou > options.iou_threshold) {
        bool& is_taken = taken[best];
        (is_taken ? false_positives : true_positives) += 1;
        is_taken = true;
      } else if (covers_crowd) {
        continue;  // ignored: no point on the curve
      } else {
        ++false_positives;
      }
      row.precision.push_back(static_cast<double>(true_positives) / static_cast<double>(true_positives + false_positives));
      row.recall.push_back(row.num_ground_truth > 0 ? static_cast<double>(true_positives) / row.num_ground_truth : 0);
    }
    if (row.num_ground_truth > 0) {
      row.average_precision = voc_average_precision(row.recall, row.precision, options.use_11_point);
      ap_sum += row.average_precision;
      ++classes_with_objects;
    }
  }
  if (classes_with_objects > 0) result.mean_average_precision = ap_sum / static_cast<double>(classes_with_objects);
  return result;
}

std::string format_voc(const VocResult& result, const VocOptions& options) {
  std::string text;
  char line[256];
  std::snprintf(line, sizeof(line), "VOC AP@%.2f (%s%s)\n", options.iou_threshold,
                options.use_11_point ? "11-point" : "all-point", result.rotated_iou ? ", rotated IoU" : "");
  text += line;
  std::snprintf(line, sizeof(line), "  %-20s %8s %10s %8s\n", "class", "objects", "detections", "AP");
  text += line;
  for (const VocClassResult& row : result.classes) {
    std::snprintf(line, sizeof(line), "  %-20s %8lld %10lld %8.4f\n", row.name.c_str(),
                  static_cast<long long>(row.num_ground_truth), static_cast<long long>(row.num_detections),
                  row.average_precision);
    text += line;
  }
  std::snprintf(line, sizeof(line), "  %-20s %8s %10s %8.4f\n", "mAP", "", "", result.mean_average_precision);
  text += line;
  return text;
}

}  // namespace minidet::data
