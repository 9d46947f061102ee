#include "data/eval/check_inputs.h"

#include <cmath>
#include <unordered_set>

#include "core/error.h"

namespace minidet::data::eval_detail {

void check_eval_inputs(const GroundTruth& truth, const std::vector<Detection>& detections, const char* evaluator) {
  MINIDET_CHECK(truth.category_names.size() == truth.category_ids.size(), evaluator, ": ",
                truth.category_ids.size(), " category ids but ", truth.category_names.size(), " names");
  const std::unordered_set<int64_t> images(truth.image_ids.begin(), truth.image_ids.end());
  const std::unordered_set<int64_t> categories(truth.category_ids.begin(), truth.category_ids.end());
  MINIDET_CHECK(images.size() == truth.image_ids.size(), evaluator, ": ground-truth image ids repeat");
  MINIDET_CHECK(categories.size() == truth.category_ids.size(), evaluator, ": ground-truth category ids repeat");
  for (size_t i = 0; i < truth.objects.size(); ++i) {
    const GroundTruthObject& object = truth.objects[i];
    MINIDET_CHECK(images.count(object.image_id) && categories.count(object.category_id), evaluator,
                  ": ground-truth object ", i, " (id ", object.id, ") refers to image ", object.image_id,
                  " and category ", object.category_id, ", which the ground truth does not list");
    MINIDET_CHECK(is_finite(object.box), evaluator, ": ground-truth object ", i, " has a non-finite box");
    MINIDET_CHECK(!truth.rotated || is_finite(object.rotated_box), evaluator, ": ground-truth object ", i,
                  " has a non-finite rotated box: ", object.rotated_box);
  }
  for (size_t i = 0; i < detections.size(); ++i) {
    const Detection& detection = detections[i];
    MINIDET_CHECK(images.count(detection.image_id), evaluator, ": detection ", i, " has image_id ",
                  detection.image_id, ", which is not among the ground-truth images");
    MINIDET_CHECK(categories.count(detection.category_id), evaluator, ": detection ", i, " has category_id ",
                  detection.category_id, ", which is not among the ground-truth categories");
    MINIDET_CHECK(is_finite(detection.box) && std::isfinite(detection.score), evaluator, ": detection ", i,
                  " has a non-finite box or score");
    MINIDET_CHECK(!detection.rotated || is_finite(detection.rotated_box), evaluator, ": detection ", i,
                  " has a non-finite rotated box: ", detection.rotated_box);
  }
}

}  // namespace minidet::data::eval_detail
