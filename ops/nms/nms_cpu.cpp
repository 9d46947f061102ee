// CPU NMS: gather the boxes into score order with their areas (checking every value is finite), then
// nms_greedy.h's greedy pass over a shrinking list of live candidates, one list per class.
#include <cmath>
#include <vector>

#include "core/factories.h"
#include "ops/nms/nms_greedy.h"
#include "ops/nms/nms_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
std::vector<int64_t> nms_host(const char* op, const NmsArgs& args) {
  const int64_t n = args.boxes.size(0);
  const T* boxes = args.boxes.data<T>();
  const T* scores = args.scores.data<T>();
  const int64_t* classes = args.class_ids.defined() ? args.class_ids.data<int64_t>() : nullptr;
  const int64_t* order = args.order.data<int64_t>();
  const T threshold = static_cast<T>(args.iou_threshold), offset = static_cast<T>(args.offset);

  // Position p in score order holds input box order[p]: its 4 coordinates, area and class side by side, so
  // the pass below reads memory in order.
  std::vector<T> sorted(4 * n), area(n);
  std::vector<int64_t> sorted_class(classes ? n : 0);
  for (int64_t p = 0; p < n; ++p) {
    const int64_t i = order[p];
    const T* box = boxes + 4 * i;
    for (int c = 0; c < 4; ++c) {
      MINIDET_CHECK(std::isfinite(box[c]), op, ": boxes contain ", box[c], " at box ", i,
                    "; expected finite coordinates");
      sorted[4 * p + c] = box[c];
    }
    MINIDET_CHECK(std::isfinite(scores[i]), op, ": scores contain ", scores[i], " at box ", i,
                  "; expected finite scores");
    area[p] = box_math::box_area(box, offset);
    if (classes) sorted_class[p] = classes[i];
  }

  return greedy_nms(n, classes ? sorted_class.data() : nullptr, order, [&](int64_t head, int64_t p) {
    return suppresses(&sorted[4 * head], area[head], &sorted[4 * p], area[p], threshold, offset);
  });
}

}  // namespace

Tensor nms_cpu(const char* op, const NmsArgs& args) {
  return MINIDET_DISPATCH_FLOATING(args.boxes.dtype(), op, [&] { return from_vector(nms_host<scalar_t>(op, args)); });
}

}  // namespace minidet::ops::detail
