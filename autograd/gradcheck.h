// gradcheck: prove an op's backward with finite differences in float64.
//
// For y = fn(inputs), the analytic gradient of the projected output L = <v, y> (v random, never all ones,
// so every output element gets a different weight) must match central differences,
//     dL/dx_j  ~=  (L(x + eps e_j) - L(x - eps e_j)) / (2 eps),
// for every input that requires grad. Three levels, chosen by size:
//   * full Jacobian (inputs x outputs <= full_jacobian_limit): every entry dy_k/dx_j is compared, with one
//     backward per output element (v one-hot) and two forwards per input element;
//   * projected output (input elements <= per_element_limit): every element of dL/dx for random v;
//   * projected both sides (larger): v^T J u for random directions u, a few times.
// It fails when any entry differs by more than atol + rtol * |numeric|, or when an input's analytic
// gradient is all zero while the numeric one is not (a backward that forgot to write). The report names the
// worst entry and both values.
//
//   auto result = autograd::gradcheck([](const TensorList& in) { return relu(in[0]); }, {x});
//   CHECK_MESSAGE(result.ok, result.report);
#pragma once

#include <functional>
#include <string>

#include "autograd/node.h"

namespace minidet::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  int64_t full_jacobian_limit = 100000;  // input elements x output elements
  int64_t full_jacobian_max_outputs = 1024;  // one backward per output element in full mode
  int64_t per_element_limit = 20000;
  int projections = 4;
  uint64_t seed = 1234;
};

struct GradcheckResult {
  bool ok = true;
  std::string report;          // what was checked, and on failure the worst entry
  double max_abs_error = 0.0;  // largest |analytic - numeric| over all checked entries
  int64_t entries_checked = 0;
};

using GradcheckFn = std::function<Tensor(const TensorList&)>;

// Inputs that require grad must be float64 CPU tensors without overlapping memory (no expanded views);
// other inputs are treated as constants. The inputs' .grad() are restored afterwards.
GradcheckResult gradcheck(const GradcheckFn& fn, const TensorList& inputs, const GradcheckOptions& options = {});
GradcheckResult gradcheck(const GradcheckFn& fn, const TensorList& inputs, double eps, double atol, double rtol);

}  // namespace minidet::autograd
