#include "ops/common/roi_checks.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"

namespace minidet::ops {
namespace {

// What is wrong with one row, or "" when nothing is. `row` holds the row's `columns` values.
std::string describe_bad_row(const double* row, int64_t columns, int64_t batch_size) {
  const double batch = row[0];
  if (!std::isfinite(batch) || batch != std::floor(batch) || batch < 0 || batch >= double(batch_size))
    return ::minidet::detail::compose("batch index ", batch, "; expected an integer in [0, ", batch_size, ")");
  for (int64_t c = 1; c < columns; ++c)
    if (!std::isfinite(row[c]))
      return ::minidet::detail::compose("coordinate ", row[c], " in column ", c, "; expected finite coordinates");
  return "";
}

[[noreturn]] void fail_row(const char* op, int64_t index, const std::vector<double>& row, int64_t batch_size) {
  MINIDET_FAIL(op, ": rois row ", index, " ", row, " has ",
               describe_bad_row(row.data(), static_cast<int64_t>(row.size()), batch_size));
}

// The CPU twin of detail::first_bad_roi_cuda: the index of the first bad row of contiguous rois, K if none.
int64_t first_bad_roi_cpu(const Tensor& rois, int64_t batch_size) {
  const int64_t count = rois.size(0), columns = rois.size(1);
  const std::vector<double> values = rois.to_vector<double>();
  for (int64_t k = 0; k < count; ++k)
    if (!describe_bad_row(values.data() + k * columns, columns, batch_size).empty()) return k;
  return count;
}

}  // namespace

void check_roi_input(const char* op, const Tensor& input) {
  check_defined(op, input, "input");
  check_dim(op, input, "input (N, C, H, W)", 4);
  check_floating(op, input, "input");
}

void check_rois(const char* op, const Tensor& input, const Tensor& rois_any, int64_t columns, bool check_values) {
  check_defined(op, rois_any, "rois");
  const char* layout = columns == 5 ? "(K, 5) rows (batch_index, x1, y1, x2, y2)"
                                    : "(K, 6) rows (batch_index, cx, cy, w, h, angle)";
  MINIDET_CHECK(rois_any.dim() == 2 && rois_any.size(1) == columns, op, ": expected rois of shape ", layout,
                ", got ", rois_any.sizes());
  check_same_dtype(op, input, "input", rois_any, "rois");
  check_same_device(op, input, "input", rois_any, "rois");
  const int64_t count = rois_any.size(0), batch_size = input.size(0);
  if (count == 0 || !check_values) return;
  const Tensor rois = rois_any.detach().contiguous();  // detached: validation is not part of the graph
  // On CUDA, the one host synchronisation (see header).
  const int64_t bad = MINIDET_DEVICE_SWITCH(rois, first_bad_roi_cpu(rois, batch_size),
                                            detail::first_bad_roi_cuda(rois, batch_size));
  if (bad < count) fail_row(op, bad, rois.select(0, bad).to_vector<double>(), batch_size);
}

void check_roi_pooling(const char* op, int64_t pooled_h, int64_t pooled_w, double spatial_scale) {
  MINIDET_CHECK(pooled_h >= 1 && pooled_w >= 1, op, ": expected output size >= 1, got (", pooled_h, ", ", pooled_w,
                ")");
  MINIDET_CHECK(std::isfinite(spatial_scale) && spatial_scale > 0, op, ": expected a finite spatial_scale > 0, got ",
                spatial_scale);
}

}  // namespace minidet::ops
