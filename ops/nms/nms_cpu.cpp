// CPU NMS: gather the boxes into score order with their areas (checking every value is finite), then the
// greedy pass over a shrinking list of live candidates, one list per class.
#include <algorithm>
#include <cmath>
#include <unordered_map>
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

  // Boxes of different classes never suppress each other, so each class runs its own pass over its own
  // boxes (batched NMS: a detector's images or classes), instead of every kept box scanning the others too.
  std::vector<std::vector<int64_t>> lists;  // per class: its positions in score order
  if (classes) {
    std::unordered_map<int64_t, size_t> list_of;
    for (int64_t p = 0; p < n; ++p) {
      const auto [it, fresh] = list_of.try_emplace(sorted_class[p], lists.size());
      if (fresh) lists.emplace_back();
      lists[it->second].push_back(p);
    }
  } else {
    lists.emplace_back(static_cast<size_t>(n));
    for (int64_t p = 0; p < n; ++p) lists[0][static_cast<size_t>(p)] = p;
  }
  // live: the positions not yet kept or suppressed, in score order. Its first entry is always the best box
  // left, so it is kept; it then removes from the list every box it suppresses. Suppressed boxes are never
  // tested again, and the loop ends as soon as nothing is left.
  std::vector<int64_t> kept_positions;
  for (std::vector<int64_t>& live : lists) {
    while (!live.empty()) {
      const int64_t head = live[0];
      kept_positions.push_back(head);
      const T* a = &sorted[4 * head];
      size_t still_live = 0;
      for (size_t r = 1; r < live.size(); ++r) {
        const int64_t p = live[r];
        if (!suppresses(a, area[head], &sorted[4 * p], area[p], threshold, offset)) live[still_live++] = p;
      }
      live.resize(still_live);
    }
  }
  // Kept boxes in decreasing score order across classes: positions ascending, as one pass would keep them.
  std::sort(kept_positions.begin(), kept_positions.end());
  std::vector<int64_t> kept;
  kept.reserve(kept_positions.size());
  for (int64_t p : kept_positions) kept.push_back(order[p]);
  return kept;
}

}  // namespace

Tensor nms_cpu(const char* op, const NmsArgs& args) {
  return MINIDET_DISPATCH_FLOATING(args.boxes.dtype(), op, [&] { return from_vector(greedy_nms<scalar_t>(op, args)); });
}

}  // namespace minidet::ops::detail
