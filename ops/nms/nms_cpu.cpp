// CPU NMS: gather the boxes into score order with their areas (checking every value is finite), then the
// greedy pass over a shrinking list of live candidates.
#include <cmath>
#include <vector>

#include "core/factories.h"
#include "ops/nms/nms_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
std::vector<int64_t> greedy_nms(const char* op, const NmsArgs& args) {
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

  // live: the positions not yet kept or suppressed, in score order. Its first entry is always the best box
  // left, so it is kept; it then removes from the list every box it suppresses. Suppressed boxes are never
  // tested again, and the loop ends as soon as nothing is left.
  std::vector<int64_t> live(n), kept;
  for (int64_t p = 0; p < n; ++p) live[p] = p;
  while (!live.empty()) {
    const int64_t head = live[0];
    kept.push_back(order[head]);
    const T* a = &sorted[4 * head];
    size_t still_live = 0;
    for (size_t r = 1; r < live.size(); ++r) {
      const int64_t p = live[r];
      const bool same_class = !classes || sorted_class[p] == sorted_class[head];
      if (!(same_class && suppresses(a, area[head], &sorted[4 * p], area[p], threshold, offset)))
        live[still_live++] = p;
    }
    live.resize(still_live);
  }
  return kept;
}

}  // namespace

Tensor nms_cpu(const char* op, const NmsArgs& args) {
  return MINIDET_DISPATCH_FLOATING(args.boxes.dtype(), op, [&] { return from_vector(greedy_nms<scalar_t>(op, args)); });
}

}  // namespace minidet::ops::detail
