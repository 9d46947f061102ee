#include "data/loader/loader.h"

#include <algorithm>

#include "core/error.h"
#include "core/factories.h"
#include "ops/shape/cat.h"

namespace minidet::data {

DataLoader::DataLoader(const Dataset& dataset, LoaderOptions options) : dataset_(dataset), options_(std::move(options)) {
  MINIDET_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be at least 1, got ", options_.batch_size);
  MINIDET_CHECK(options_.num_shards >= 1 && options_.shard_index >= 0 && options_.shard_index < options_.num_shards,
                "DataLoader: shard_index ", options_.shard_index, " must be in 0..num_shards-1 (num_shards ",
                options_.num_shards, ")");
  start_epoch(0);
}

DataLoader::~DataLoader() {
  if (pending_.valid()) pending_.wait();
}

void DataLoader::start_epoch(int64_t epoch) {
  if (pending_.valid()) pending_.wait();  // the task reads order_, which is about to change
  pending_ = {};
  epoch_ = epoch;
  next_batch_ = 0;
  order_.resize(static_cast<size_t>(dataset_.size()));
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
  if (options_.shuffle) {
    Generator generator(mix_seed(mix_seed(options_.seed) ^ static_cast<uint64_t>(epoch)));
    for (int64_t i = static_cast<int64_t>(order_.size()) - 1; i > 0; --i)  // Fisher-Yates
      std::swap(order_[i], order_[generator.next_int(0, i + 1)]);
  }
}

int64_t DataLoader::batches_per_epoch() const {
  const int64_t count = static_cast<int64_t>(order_.size());
  const int64_t global = options_.batch_size * options_.num_shards;
  return options_.drop_last ? count / global : (count + global - 1) / global;
}

Batch DataLoader::build_batch(int64_t batch_index) const {
  // This shard's part of global batch `batch_index` (see the header): equal parts of a full global batch,
  // an even split of a short last one.
  const int64_t global = options_.batch_size * options_.num_shards;
  const int64_t global_begin = batch_index * global;
  const int64_t length = std::min<int64_t>(global, static_cast<int64_t>(order_.size()) - global_begin);
  const int64_t begin = global_begin + length * options_.shard_index / options_.num_shards;
  const int64_t end = global_begin + length * (options_.shard_index + 1) / options_.num_shards;
  std::vector<Sample> samples;
  std::vector<int64_t> indices(order_.begin() + begin, order_.begin() + end);
  for (int64_t index : indices) {
    Sample sample = dataset_.get(index);
    if (options_.transform) {
      const uint64_t epoch_seed = mix_seed(mix_seed(options_.seed) ^ static_cast<uint64_t>(epoch_));
      Generator generator(mix_seed(epoch_seed ^ static_cast<uint64_t>(index)));
      sample = options_.transform(std::move(sample), generator);
    }
    samples.push_back(std::move(sample));
  }
  return collate(samples, indices);
}

void DataLoader::launch(int64_t batch_index) {
  pending_ = std::async(std::launch::async, [this, batch_index] { return build_batch(batch_index); });
}

std::optional<Batch> DataLoader::next() {
  if (next_batch_ >= batches_per_epoch()) return std::nullopt;
  Batch batch;
  if (pending_.valid()) {
    std::future<Batch> ready = std::move(pending_);
    pending_ = {};
    batch = ready.get();  // rethrows what the background build threw
  } else {
    batch = build_batch(next_batch_);
  }
  ++next_batch_;
  if (options_.prefetch && next_batch_ < batches_per_epoch()) launch(next_batch_);
  return batch;
}

Batch collate(const std::vector<Sample>& samples, const std::vector<int64_t>& indices) {
  MINIDET_CHECK(samples.size() == indices.size(), "collate: ", samples.size(), " samples but ", indices.size(),
                " indices");
  Batch batch;
  batch.indices = indices;
  int64_t height = 0, width = 0;
  for (const Sample& sample : samples) {
    height = std::max(height, sample.image.height);
    width = std::max(width, sample.image.width);
  }
  const int64_t count = static_cast<int64_t>(samples.size());
  batch.images = zeros({count, 3, height, width});
  float* pixels = batch.images.data<float>();
  for (int64_t b = 0; b < count; ++b) {
    const Sample& sample = samples[b];
    check_sample(sample, INT64_MAX, "collate: sample " + std::to_string(indices[b]));
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < sample.image.height; ++y)
        for (int64_t x = 0; x < sample.image.width; ++x)
          pixels[((b * 3 + c) * height + y) * width + x] = sample.image.at(x, y)[c] / 255.0f;
    std::vector<float> corners;
    for (const Box& box : sample.boxes)
      for (double value : {box.x1, box.y1, box.x2, box.y2}) corners.push_back(static_cast<float>(value));
    const int64_t objects = static_cast<int64_t>(sample.boxes.size());
    batch.boxes.push_back(from_vector<float>(corners, {objects, 4}));
    batch.labels.push_back(from_vector<int64_t>(sample.labels, {objects}));
    std::vector<RotatedBox> rotated = sample.rotated_boxes;
    if (rotated.empty())
      for (const Box& box : sample.boxes) rotated.push_back(from_axis_aligned(box));
    batch.rotated_boxes.push_back(rotated_boxes_tensor(rotated));
    batch.image_ids.push_back(sample.image_id);
    batch.image_sizes.push_back({sample.image.height, sample.image.width});
    batch.flipped.push_back(sample.flipped);
  }
  return batch;
}

Batch to_device(const Batch& batch, const TensorOptions& image_options, TargetBoxes which) {
  const char* op = "data::to_device";
  const bool rotated = which == TargetBoxes::kRotated;
  const std::vector<Tensor>& source = rotated ? batch.rotated_boxes : batch.boxes;
  const char* name = rotated ? "rotated_boxes" : "boxes";
  const int64_t width = rotated ? 5 : 4;
  MINIDET_CHECK(batch.images.defined(), op, ": the batch has no images");
  MINIDET_CHECK(source.size() == batch.labels.size(), op, ": expected one labels tensor per ", name,
                " tensor, got ", batch.labels.size(), " and ", source.size());
  Batch out = batch;
  out.images = batch.images.to(image_options);
  out.boxes = source;
  out.rotated_boxes.clear();
  if (source.empty()) return out;
  std::vector<Tensor> boxes, labels;
  for (size_t n = 0; n < source.size(); ++n) {
    const Tensor &b = source[n], &l = batch.labels[n];
    MINIDET_CHECK(b.defined() && l.defined() && b.dim() == 2 && b.size(1) == width && l.dim() == 1 &&
                      l.size(0) == b.size(0),
                  op, ": expected ", name, "[", n, "] of shape (M, ", width, ") and labels[", n, "] of shape (M)");
    boxes.push_back(b.detach().to(image_options.dtype));
    labels.push_back(batch.labels[n]);
  }
  const Tensor all_boxes = cat(boxes, 0).to(image_options.device);
  const Tensor all_labels = cat(labels, 0).to(image_options.device);
  int64_t offset = 0;
  for (size_t n = 0; n < source.size(); ++n) {
    const int64_t objects = source[n].size(0);
    out.boxes[n] = all_boxes.narrow(0, offset, objects);
    out.labels[n] = all_labels.narrow(0, offset, objects);
    offset += objects;
  }
  return out;
}

}  // namespace minidet::data
