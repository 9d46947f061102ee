// CPU NMS: gather the boxes into score order with their areas (checking every value is finite), then
// nms_greedy.h's greedy NMS, one pass per class, each pass the vectorised one below.
#include <cmath>
#include <vector>

#include "core/factories.h"
#include "ops/nms/nms_greedy.h"
#include "ops/nms/nms_kernels.h"

namespace minidet::ops::detail {
namespace {

// One class's greedy pass (nms_greedy.h's greedy_pass, the same boxes kept), laid out for the CPU's vector
// units. The live boxes sit in one array per coordinate, in score order, from `begin` to `end`: keeping the
// first one tests it against all the others with iou_above (nms_kernels.h), a loop the compiler vectorises.
// The arrays are compacted only from the first box that it suppresses: most kept boxes suppress none, and
// then keeping one costs one pass of tests and no copy.
template <typename T>
void axis_aligned_pass(const std::vector<int64_t>& positions, const T* sorted, const T* area, T threshold, T offset,
                       std::vector<int64_t>& kept) {
  const size_t n = positions.size();
  std::vector<T> x1(n), y1(n), x2(n), y2(n), live_area(n);
  std::vector<int64_t> position(positions);
  std::vector<int32_t> suppressed(n);  // 32-bit, the width of a float lane: the flags loop vectorises whole
  for (size_t i = 0; i < n; ++i) {
    const T* box = sorted + 4 * position[i];
    x1[i] = box[0];
    y1[i] = box[1];
    x2[i] = box[2];
    y2[i] = box[3];
    live_area[i] = area[position[i]];
  }
  size_t begin = 0, end = n;
  while (begin < end) {
    const size_t head = begin++;
    kept.push_back(position[head]);
    const T hx1 = x1[head], hy1 = y1[head], hx2 = x2[head], hy2 = y2[head], head_area = live_area[head];
    int32_t any = 0;
    for (size_t r = begin; r < end; ++r) {
      suppressed[r] = iou_above(hx1, hy1, hx2, hy2, head_area, x1[r], y1[r], x2[r], y2[r], live_area[r], threshold,
                                offset);
      any |= suppressed[r];
    }
    if (!any) continue;
    size_t live = begin;
    while (!suppressed[live]) ++live;
    for (size_t r = live; r < end; ++r) {  // every entry is copied down; only live ones advance `live`
      x1[live] = x1[r];
      y1[live] = y1[r];
      x2[live] = x2[r];
      y2[live] = y2[r];
      live_area[live] = live_area[r];
      position[live] = position[r];
      live += !suppressed[r];
    }
    end = live;
  }
}

template <typename T>
std::vector<int64_t> nms_host(const char* op, const NmsArgs& args) {
  const int64_t n = args.boxes.size(0);
  const T* boxes = args.boxes.data<T>();
  const T* scores = args.scores.data<T>();
  const int64_t* classes = args.class_ids.defined() ? args.class_ids.data<int64_t>() : nullptr;
  const int64_t* order = args.order.data<int64_t>();
  const T threshold = static_cast<T>(args.iou_threshold), offset = static_cast<T>(args.offset);

  // Position p in score order holds input box order[p]: its 4 coordinates, area and class.
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

  return greedy_nms(n, classes ? sorted_class.data() : nullptr, order,
                    [&](const std::vector<int64_t>& positions, std::vector<int64_t>& kept) {
                      axis_aligned_pass(positions, sorted.data(), area.data(), threshold, offset, kept);
                    });
}

}  // namespace

Tensor nms_cpu(const char* op, const NmsArgs& args) {
  return MINIDET_DISPATCH_FLOATING(args.boxes.dtype(), op, [&] { return from_vector(nms_host<scalar_t>(op, args)); });
}

}  // namespace minidet::ops::detail
