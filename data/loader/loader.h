// DataLoader: shuffled, seeded mini-batches of a Dataset, with the next batch prepared on a background
// thread while the caller trains on the current one.
//
//   LoaderOptions options;
//   options.batch_size = 8;
//   options.transform = random_horizontal_flip();
//   DataLoader loader(dataset, options);
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.start_epoch(epoch);
//     while (auto batch = loader.next()) train_step(batch->images, batch->boxes, batch->labels);
//   }
//
// Determinism: epoch e visits the dataset in a permutation drawn from a Generator seeded by (seed, e), and
// the transform of sample i in epoch e draws from a Generator seeded by (seed, e, i). Nothing depends on when
// the background thread runs, so the same seed gives the same batches with or without prefetching.
//
// Sharding (data-parallel training, dist/): with num_shards = N ranks, every rank draws the same epoch
// permutation (same seed) and cuts it into global batches of N * batch_size; shard s takes part s of each:
//   order:  [ g0: s0 s0 s1 s1 | g1: s0 s0 s1 s1 | g2 (short): s0 s1 ]     (batch_size 2, N = 2)
// so one step of N ranks sees exactly the images one process with batch N * batch_size would, every image
// is seen once per epoch across the ranks, and every rank has the same batches_per_epoch (collectives stay
// in step). A short last global batch (drop_last false) is split as evenly as possible.
//
// Prefetching is one std::async task at a time: next() takes the finished batch k and starts batch k + 1.
// An exception thrown while building a batch (say, a corrupt image) reaches the caller from the next() that
// would have returned it. The dataset must outlive the loader, and its get() must be thread-safe (see
// data/dataset/dataset.h).
#pragma once

#include <array>
#include <cstdint>
#include <future>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "data/dataset/dataset.h"
#include "data/transforms/transforms.h"

namespace minidet::data {

struct Batch {
  Tensor images;                 // (B, 3, H, W) float32 in [0, 1], zero-padded at the right and bottom to
                                 // the largest height and width in the batch
  std::vector<Tensor> boxes;     // per image, (N_i, 4) float32 (x1, y1, x2, y2)
  std::vector<Tensor> labels;    // per image, (N_i,) int64 in 1..C
  // Per image, (N_i, 5) float32 (cx, cy, w, h, angle): the samples' rotated_boxes, or for a sample without
  // them (an axis-aligned dataset) its boxes as rotated boxes at angle 0 (data/box/rotated_box.h,
  // from_axis_aligned), the same regions. A rotated detector trains on these.
  std::vector<Tensor> rotated_boxes;
  std::vector<int64_t> image_ids;
  std::vector<std::array<int64_t, 2>> image_sizes;  // per image (height, width) before padding
  std::vector<int64_t> indices;  // dataset indices, in batch order
  std::vector<bool> flipped;     // per image, Sample::flipped: mirrored left-right by the transform

  int64_t size() const { return static_cast<int64_t>(image_ids.size()); }
};

struct LoaderOptions {
  int64_t batch_size = 8;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;  // leave out a final batch smaller than batch_size
  bool prefetch = true;    // build the next batch on a background thread
  Transform transform;     // applied to each sample; none when empty
  int64_t num_shards = 1;  // data parallel: how many ranks share each global batch
  int64_t shard_index = 0; // this rank's part, 0..num_shards-1
};

class DataLoader {
 public:
  DataLoader(const Dataset& dataset, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Restarts at the first batch of `epoch` (the constructor starts epoch 0). Waits for any prefetch.
  void start_epoch(int64_t epoch);
  // The next batch of the current epoch, or nothing once the epoch is over.
  std::optional<Batch> next();

  int64_t batches_per_epoch() const;
  int64_t epoch() const { return epoch_; }
  const std::vector<int64_t>& order() const { return order_; }  // this epoch's dataset indices

 private:
  Batch build_batch(int64_t batch_index) const;
  void launch(int64_t batch_index);

  const Dataset& dataset_;
  LoaderOptions options_;
  int64_t epoch_ = 0;
  int64_t next_batch_ = 0;
  std::vector<int64_t> order_;
  std::future<Batch> pending_;  // the prefetched batch next_batch_, when valid
};

// Stacks samples into a Batch (no transform). Exposed for tests and custom loops.
Batch collate(const std::vector<Sample>& samples, const std::vector<int64_t>& indices);

// The batch where a model of `image_options` (dtype, device) reads it: images converted to those options,
// every image's boxes to the images' dtype and device, labels to the device; image_sizes, image_ids, indices
// and flipped copied. The targets travel as two copies, all boxes in one and all labels in the other, each
// image's tensors being views (narrow) of them, instead of 2 x batch copies of a few bytes each (every copy
// to a GPU is an API call and a staging copy). An image without objects gets (0, D) and (0) views.
// `boxes` picks which boxes travel: the axis-aligned ones (M, 4), or the rotated ones (M, 5), which then
// take the place of `boxes` in the result, so that a model reads its targets from `boxes` whatever its box
// type. The result's rotated_boxes is empty either way: only the chosen boxes travel.
enum class TargetBoxes { kAxisAligned, kRotated };
Batch to_device(const Batch& batch, const TensorOptions& image_options,
                TargetBoxes boxes = TargetBoxes::kAxisAligned);

}  // namespace minidet::data
