// Validation shared by the evaluators: every detection must refer to an image and a category of the
// ground truth, with a finite box and score (and a finite rotated box where it has one). Internal to data/eval.
#pragma once

#include <vector>

#include "data/eval/eval_types.h"

namespace minidet::data::eval_detail {

void check_eval_inputs(const GroundTruth& ground_truth, const std::vector<Detection>& detections,
                       const char* evaluator);

}  // namespace minidet::data::eval_detail
