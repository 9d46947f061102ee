// LossWatch (see loss_watch.h).
#include "engine/loss_watch.h"

#include "core/error.h"
#include "core/factories.h"

namespace minidet::engine {

LossWatch::LossWatch(int64_t capacity, const Device& device)
    : table_(zeros({capacity, 5}, TensorOptions(kFloat64, device))) {
  MINIDET_CHECK(capacity >= 1, "LossWatch: expected a capacity >= 1, got ", capacity);
}

void LossWatch::record(int64_t step, const Tensor& values) {
  const int64_t row = pending();
  MINIDET_CHECK(row < table_.size(0), "LossWatch: ", row, " steps recorded and not taken; the capacity is ",
                table_.size(0));
  MINIDET_CHECK(values.numel() == 5, "LossWatch: expected the 5 losses of a step, got ", values.sizes());
  table_.select(0, row).copy_(values.reshape({5}));  // a device-side copy (and dtype cast), no sync
  steps_.push_back(step);
}

std::vector<LossRow> LossWatch::take() {
  std::vector<LossRow> rows;
  if (steps_.empty()) return rows;
  const int64_t count = pending();
  const std::vector<double> host = table_.narrow(0, 0, count).to_vector<double>();  // the one copy
  for (int64_t r = 0; r < count; ++r) {
    LossRow row;
    row.step = steps_[r];
    for (int j = 0; j < 5; ++j) row.values[j] = host[r * 5 + j];
    rows.push_back(row);
  }
  steps_.clear();
  return rows;
}

}  // namespace minidet::engine
