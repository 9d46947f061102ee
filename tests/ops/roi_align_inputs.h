// Inputs shared by the roi_align tests (test_roi_align.cpp, test_roi_align_cuda.cpp): seeded features and
// RoIs, and RoI rows from literals.
#pragma once

#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "ops/shape/cat.h"

namespace minidet::test::roi_align_inputs {

inline Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

// K random boxes (x1, y1, x2, y2) in image pixels over a (height x width) feature map at `scale`, with
// some boxes spilling over the border; batch indices cycle through [0, images).
struct RandomRois {
  Tensor batch;  // (K, 1)
  Tensor boxes;  // (K, 4)
};
inline RandomRois random_rois(int64_t count, int64_t images, double height, double width, double scale,
                              uint64_t seed, DType dtype = kFloat64) {
  Generator g(seed);
  const std::vector<double> u = rand({count, 4}, kFloat64, &g).to_vector<double>();
  std::vector<double> batch, boxes;
  for (int64_t k = 0; k < count; ++k) {
    const double w = (0.2 + 0.7 * u[k * 4 + 2]) * width / scale, h = (0.2 + 0.7 * u[k * 4 + 3]) * height / scale;
    const double x1 = (u[k * 4 + 0] * 1.1 - 0.15) * width / scale, y1 = (u[k * 4 + 1] * 1.1 - 0.15) * height / scale;
    batch.push_back(double(k % images));
    boxes.insert(boxes.end(), {x1, y1, x1 + w, y1 + h});
  }
  return {from_vector<double>(batch, {count, 1}).to(dtype), from_vector<double>(boxes, {count, 4}).to(dtype)};
}

inline Tensor rois_of(const RandomRois& r) { return cat({r.batch, r.boxes}, 1); }

inline Tensor rois_from(const std::vector<double>& rows) {
  return from_vector<double>(rows, {int64_t(rows.size() / 5), 5});
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace minidet::test::roi_align_inputs
