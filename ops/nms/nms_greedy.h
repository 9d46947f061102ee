// The host's greedy NMS, shared by nms_cpu.cpp and nms_rotated_cpu.cpp: they gather the boxes into score
// order (position p holds input box order[p]) and supply one class's greedy pass; greedy_nms runs it per class.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace minidet::ops::detail {

// Below this many boxes in all, the classes' passes run on the calling thread: a pass over a few hundred
// boxes takes about as long as waking a thread team.
inline constexpr int64_t kParallelAboveNmsBoxes = 512;

// One class's greedy pass for any suppression test. live: the class's positions in score order; suppresses(head,
// p): does the kept position head suppress the later position p. Appends the kept positions to `kept`.
// The first live entry is always the best box left, so it is kept; it then removes from the list every box it
// suppresses. Suppressed boxes are never tested again, and the loop ends as soon as nothing is left.
template <typename Suppresses>
void greedy_pass(std::vector<int64_t> live, Suppresses suppresses, std::vector<int64_t>& kept) {
  while (!live.empty()) {
    const int64_t head = live[0];
    kept.push_back(head);
    size_t still_live = 0;
    for (size_t r = 1; r < live.size(); ++r) {
      const int64_t p = live[r];
      if (!suppresses(head, p)) live[still_live++] = p;
    }
    live.resize(still_live);
  }
}

// n boxes in score order; sorted_class: each position's class, or null for one class; order: the input index
// of each position; pass(positions, kept): one class's greedy pass (its positions in score order; it appends
// the kept ones to kept). Returns the kept input indices in decreasing score order.
template <typename Pass>
std::vector<int64_t> greedy_nms(int64_t n, const int64_t* sorted_class, const int64_t* order, Pass pass) {
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
  // The passes are independent, so they may run on several threads: each writes only its own list's result.
  std::vector<std::vector<int64_t>> kept_of(lists.size());
  const int64_t classes = static_cast<int64_t>(lists.size());
#pragma omp parallel for schedule(dynamic, 1) if (classes > 1 && n > kParallelAboveNmsBoxes)
  for (int64_t c = 0; c < classes; ++c) pass(lists[static_cast<size_t>(c)], kept_of[static_cast<size_t>(c)]);
  // Kept boxes in decreasing score order across classes: positions ascending, as one pass would keep them.
  std::vector<int64_t> kept_positions;
  for (const std::vector<int64_t>& kept : kept_of)
    kept_positions.insert(kept_positions.end(), kept.begin(), kept.end());
  std::sort(kept_positions.begin(), kept_positions.end());
  std::vector<int64_t> kept;
  kept.reserve(kept_positions.size());
  for (int64_t p : kept_positions) kept.push_back(order[p]);
  return kept;
}

}  // namespace minidet::ops::detail
