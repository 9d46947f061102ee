// How a loss folds its per-element values into the result, shared by every loss in ops/loss/.
//
//   None  the per-element (or per-sample) losses, unreduced
//   Mean  their average: sum / count for the pointwise losses; for cross_entropy, sum / (sum of the
//         weights of the non-ignored targets), PyTorch's weighted mean
//   Sum   their sum
// Mean of nothing is 0 / 0 = NaN, as in PyTorch.
#pragma once

namespace minidet {

enum class Reduction { None, Mean, Sum };

inline const char* reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return "none";
    case Reduction::Mean: return "mean";
    case Reduction::Sum: return "sum";
  }
  return "?";
}

}  // namespace minidet
