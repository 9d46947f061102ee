// The host's greedy NMS pass, shared by nms_cpu.cpp and nms_rotated_cpu.cpp: they gather the boxes into score
// order (position p holds input box order[p]) and say how one box suppresses another; the pass is this.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace minidet::ops::detail {

// n boxes in score order; sorted_class: each position's class, or null for one class; order: the input index
// of each position; suppresses(head, p): does the kept position head suppress the later position p. Returns
// the kept input indices in decreasing score order.
template <typename Suppresses>
std::vector<int64_t> greedy_nms(int64_t n, const int64_t* sorted_class, const int64_t* order, Suppresses suppresses) {
  // Boxes of different classes never suppress each other, so each class runs its own pass over its own
  // boxes (batched NMS: a detector's images or classes), instead of every kept box scanning the others too.
  std::vector<std::vector<int64_t>> lists;  // per class: its positions in score order
  if (sorted_class) {
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
      size_t still_live = 0;
      for (size_t r = 1; r < live.size(); ++r) {
        const int64_t p = live[r];
        if (!suppresses(head, p)) live[still_live++] = p;
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

}  // namespace minidet::ops::detail
