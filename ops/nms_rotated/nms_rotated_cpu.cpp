// CPU rotated NMS: gather the boxes into score order and prepare each once (corners, area, bounds; checking
// every value is finite), then ops/nms/nms_greedy.h's greedy pass over a shrinking list of live candidates,
// one list per class, with the rotated pair test.
#include <cmath>
#include <vector>

#include "core/factories.h"
#include "ops/nms/nms_greedy.h"
#include "ops/nms_rotated/nms_rotated_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
std::vector<int64_t> nms_rotated_host(const char* op, const NmsRotatedArgs& args) {
  const int64_t n = args.boxes.size(0);
  const T* boxes = args.boxes.data<T>();
  const T* scores = args.scores.data<T>();
  const int64_t* classes = args.class_ids.defined() ? args.class_ids.data<int64_t>() : nullptr;
  const int64_t* order = args.order.data<int64_t>();
  const T threshold = static_cast<T>(args.iou_threshold);

  // Position p in score order holds input box order[p], prepared: the pass below reads memory in order and
  // never calls sin or cos.
  std::vector<RotatedNmsBox<T>> sorted(static_cast<size_t>(n));
  std::vector<int64_t> sorted_class(classes ? n : 0);
  for (int64_t p = 0; p < n; ++p) {
    const int64_t i = order[p];
    const T* box = boxes + 5 * i;
    for (int c = 0; c < 5; ++c)
      MINIDET_CHECK(std::isfinite(box[c]), op, ": boxes contain ", box[c], " at box ", i,
                    "; expected finite values (cx, cy, w, h, angle)");
    MINIDET_CHECK(std::isfinite(scores[i]), op, ": scores contain ", scores[i], " at box ", i,
                  "; expected finite scores");
    sorted[static_cast<size_t>(p)] = prepare_rotated_box(box);
    if (classes) sorted_class[static_cast<size_t>(p)] = classes[i];
  }

  // Asked as IoU(kept, later), the order the CUDA mask uses too.
  const auto suppresses = [&](int64_t head, int64_t p) {
    return rotated_suppresses(sorted[static_cast<size_t>(head)], sorted[static_cast<size_t>(p)], threshold);
  };
  return greedy_nms(n, classes ? sorted_class.data() : nullptr, order,
                    [&](const std::vector<int64_t>& positions, std::vector<int64_t>& kept) {
                      greedy_pass(positions, suppresses, kept);
                    });
}

}  // namespace

Tensor nms_rotated_cpu(const char* op, const NmsRotatedArgs& args) {
  return MINIDET_DISPATCH_FLOATING(args.boxes.dtype(), op,
                                   [&] { return from_vector(nms_rotated_host<scalar_t>(op, args)); });
}

}  // namespace minidet::ops::detail
