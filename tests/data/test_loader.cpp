// The loader: batches cover the dataset once per epoch, in a seeded order, identical with or without the
// background thread; to_device moves a batch where a model reads it.
#include <set>

#include "core/factories.h"
#include "core/transfer_counts.h"
#include "data/loader/loader.h"
#include "data/shapes/rotated_shapes_dataset.h"
#include "data/shapes/shapes_dataset.h"
#include "tests/support.h"

using namespace minidet::data;

namespace {

ShapesDataset tiny_shapes() {
  ShapesOptions options;
  options.train_images = 21;
  return ShapesDataset(Split::kTrain, options);
}

std::vector<int64_t> epoch_order(DataLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<int64_t> seen;
  while (auto batch = loader.next()) seen.insert(seen.end(), batch->indices.begin(), batch->indices.end());
  return seen;
}

// A dataset whose sample 5 cannot be read, to see the error cross the thread.
class BrokenDataset : public Dataset {
 public:
  int64_t size() const override { return 8; }
  Sample get(int64_t index) const override {
    MINIDET_CHECK(index != 5, "BrokenDataset: sample ", index, " is unreadable");
    Sample sample;
    sample.image = Image(8, 8);
    sample.image_id = index + 1;
    return sample;
  }
  std::vector<std::string> class_names() const override { return {"thing"}; }
};

// Three images of 8 x 8: two objects, none, one; float32 boxes and int64 labels, as collate makes them.
Batch three_images() {
  Batch batch;
  batch.images = minidet::rand({3, 3, 8, 8});
  batch.boxes = {minidet::from_vector<float>({0, 0, 4, 4, 1, 2, 7, 8}, {2, 4}), minidet::zeros({0, 4}),
                 minidet::from_vector<float>({2, 3, 5, 6}, {1, 4})};
  batch.labels = {minidet::from_vector<int64_t>({1, 3}, {2}), minidet::zeros({0}, minidet::kInt64),
                  minidet::from_vector<int64_t>({2}, {1})};
  batch.image_ids = {10, 11, 12};
  batch.image_sizes = {{8, 8}, {8, 6}, {7, 8}};
  batch.indices = {4, 0, 2};
  batch.flipped = {false, true, false};
  return batch;
}

// Every field of `moved` holds `batch`'s values, the boxes and images in `dtype`.
void check_same_batch(const Batch& moved, const Batch& batch, minidet::DType dtype) {
  CHECK(moved.images.dtype() == dtype);
  CHECK(moved.images.to(minidet::Device::cpu()).to(minidet::kFloat64).to_vector<double>() ==
        batch.images.to(minidet::kFloat64).to_vector<double>());
  REQUIRE(moved.boxes.size() == batch.boxes.size());
  REQUIRE(moved.labels.size() == batch.labels.size());
  for (size_t n = 0; n < batch.boxes.size(); ++n) {
    CAPTURE(n);
    CHECK(moved.boxes[n].dtype() == dtype);
    CHECK(moved.boxes[n].sizes() == batch.boxes[n].sizes());
    CHECK(moved.labels[n].sizes() == batch.labels[n].sizes());
    CHECK(moved.boxes[n].to(minidet::Device::cpu()).to(minidet::kFloat64).to_vector<double>() ==
          batch.boxes[n].to(minidet::kFloat64).to_vector<double>());
    CHECK(moved.labels[n].to(minidet::Device::cpu()).to_vector<int64_t>() == batch.labels[n].to_vector<int64_t>());
  }
  CHECK(moved.image_ids == batch.image_ids);
  CHECK(moved.image_sizes == batch.image_sizes);
  CHECK(moved.indices == batch.indices);
  CHECK(moved.flipped == batch.flipped);
}

}  // namespace

TEST_CASE("values/loader: to_device gives every image views of one boxes and one labels tensor") {
  const Batch batch = three_images();
  const Batch moved = to_device(batch, minidet::kFloat64);
  check_same_batch(moved, batch, minidet::kFloat64);
  // One storage for all boxes and one for all labels, each image's rows in batch order (image 1's are empty).
  CHECK(moved.boxes[0].storage() == moved.boxes[2].storage());
  CHECK(moved.labels[0].storage() == moved.labels[2].storage());
  CHECK(moved.boxes[2].storage_offset() == 2 * 4);
  CHECK(moved.labels[2].storage_offset() == 2);
  CHECK(moved.boxes[1].sizes() == minidet::Shape({0, 4}));
  // The source batch is left as it was.
  CHECK(batch.boxes[0].dtype() == minidet::kFloat32);

  // A batch of images without objects, and a batch without targets at all.
  Batch empty = batch;
  empty.boxes = {minidet::zeros({0, 4}), minidet::zeros({0, 4}), minidet::zeros({0, 4})};
  empty.labels = {minidet::zeros({0}, minidet::kInt64), minidet::zeros({0}, minidet::kInt64),
                  minidet::zeros({0}, minidet::kInt64)};
  check_same_batch(to_device(empty, minidet::kFloat32), empty, minidet::kFloat32);
  empty.boxes.clear();
  empty.labels.clear();
  CHECK(to_device(empty, minidet::kFloat32).boxes.empty());
}

TEST_CASE("values/loader: rotated targets are the rotated boxes or the axis-aligned ones at angle 0") {
  // A rotated dataset: each image's (M, 5) rows are its samples' rotated boxes.
  RotatedShapesOptions rotated_options;
  rotated_options.train_images = 6;
  const RotatedShapesDataset rotated(Split::kTrain, rotated_options);
  LoaderOptions options;
  options.batch_size = 3;
  options.shuffle = false;
  DataLoader loader(rotated, options);
  const Batch batch = *loader.next();
  REQUIRE(batch.rotated_boxes.size() == 3);
  for (int64_t n = 0; n < 3; ++n) {
    const Sample sample = rotated.get(n);
    CHECK(batch.rotated_boxes[n].sizes() == minidet::Shape{static_cast<int64_t>(sample.labels.size()), 5});
    CHECK(batch.rotated_boxes[n].dtype() == minidet::kFloat32);
    CHECK(batch.rotated_boxes[n].to_vector<float>() ==
          rotated_boxes_tensor(sample.rotated_boxes).to_vector<float>());
  }
  // to_device with the rotated boxes: they take the place of boxes, in one copy, as the axis-aligned do.
  const Batch moved = to_device(batch, minidet::kFloat64, TargetBoxes::kRotated);
  CHECK(moved.rotated_boxes.empty());
  for (int64_t n = 0; n < 3; ++n) {
    CHECK(moved.boxes[n].dtype() == minidet::kFloat64);
    CHECK(moved.boxes[n].to(minidet::kFloat32).to_vector<float>() == batch.rotated_boxes[n].to_vector<float>());
  }
  // An axis-aligned dataset: its boxes (x1, y1, x2, y2) as (cx, cy, w, h, 0).
  const ShapesDataset shapes = tiny_shapes();
  DataLoader axis_loader(shapes, options);
  const Batch axis = *axis_loader.next();
  for (int64_t n = 0; n < 3; ++n) {
    const std::vector<float> xyxy = axis.boxes[n].to_vector<float>(), rows = axis.rotated_boxes[n].to_vector<float>();
    REQUIRE(rows.size() == xyxy.size() / 4 * 5);
    for (size_t m = 0; m < xyxy.size() / 4; ++m) {
      const float* b = &xyxy[4 * m];
      CHECK(std::vector<float>(rows.begin() + 5 * m, rows.begin() + 5 * m + 5) ==
            std::vector<float>{(b[0] + b[2]) / 2, (b[1] + b[3]) / 2, b[2] - b[0], b[3] - b[1], 0});
    }
  }
}

TEST_CASE("errors/loader: to_device names a batch whose targets do not pair up") {
  Batch batch = three_images();
  batch.labels.pop_back();
  CHECK_THROWS_CONTAINING(to_device(batch, minidet::kFloat32),
                          "data::to_device: expected one labels tensor per boxes tensor, got 2 and 3");
  batch = three_images();
  batch.labels[0] = minidet::from_vector<int64_t>({1}, {1});
  CHECK_THROWS_CONTAINING(to_device(batch, minidet::kFloat32),
                          "data::to_device: expected boxes[0] of shape (M, 4) and labels[0] of shape (M)");
  CHECK_THROWS_CONTAINING(to_device(Batch(), minidet::kFloat32), "data::to_device: the batch has no images");
  // Rotated targets: one (M, 5) tensor per labels tensor.
  batch = three_images();
  CHECK_THROWS_CONTAINING(to_device(batch, minidet::kFloat32, TargetBoxes::kRotated),
                          "data::to_device: expected one labels tensor per rotated_boxes tensor, got 3 and 0");
  batch.rotated_boxes = batch.boxes;
  CHECK_THROWS_CONTAINING(to_device(batch, minidet::kFloat32, TargetBoxes::kRotated),
                          "data::to_device: expected rotated_boxes[0] of shape (M, 5) and labels[0] of shape (M)");
}

MINIDET_CUDA_TEST_CASE("cuda/loader: to_device uploads a batch in three copies whatever its size") {
  const Batch batch = three_images();
  const minidet::TensorOptions gpu(minidet::kFloat32, minidet::Device::cuda());
  to_device(batch, gpu);  // warm-up: nothing lazily set up is counted
  const minidet::TransferCounts before = minidet::transfer_counts();
  const Batch moved = to_device(batch, gpu);
  const minidet::TransferCounts copies = minidet::transfer_counts() - before;
  CHECK(copies.host_to_device == 3);  // the images, all boxes, all labels
  CHECK(copies.device_to_host == 0);
  for (size_t n = 0; n < moved.boxes.size(); ++n) {
    CHECK(moved.boxes[n].is_cuda());
    CHECK(moved.labels[n].is_cuda());
  }
  CHECK(moved.images.is_cuda());
  check_same_batch(moved, batch, minidet::kFloat32);
}

TEST_CASE("values/loader: batches hold images boxes and labels") {
  const ShapesDataset dataset = tiny_shapes();
  LoaderOptions options;
  options.batch_size = 4;
  options.seed = 3;
  DataLoader loader(dataset, options);
  CHECK(loader.batches_per_epoch() == 6);
  auto batch = loader.next();
  REQUIRE(batch.has_value());
  CHECK(batch->images.sizes() == minidet::Shape{4, 3, 64, 64});
  REQUIRE(batch->boxes.size() == 4);
  for (int64_t b = 0; b < 4; ++b) {
    const Sample sample = dataset.get(batch->indices[b]);
    CHECK(batch->image_ids[b] == sample.image_id);
    CHECK(batch->boxes[b].sizes() == minidet::Shape{static_cast<int64_t>(sample.boxes.size()), 4});
    CHECK(batch->labels[b].to_vector<int64_t>() == sample.labels);
    const std::vector<float> corners = batch->boxes[b].to_vector<float>();
    for (size_t i = 0; i < sample.boxes.size(); ++i) CHECK(corners[4 * i + 2] == float(sample.boxes[i].x2));
    const std::vector<float> pixels = batch->images.select(0, b).to_vector<float>();
    CHECK(pixels[64 * 10 + 7] == doctest::Approx(sample.image.at(7, 10)[0] / 255.0));
  }
}

TEST_CASE("values/loader: seeded shuffling covers every sample once per epoch") {
  const ShapesDataset dataset = tiny_shapes();
  LoaderOptions options;
  options.batch_size = 5;
  options.seed = 11;
  DataLoader loader(dataset, options);
  const std::vector<int64_t> first = epoch_order(loader, 0), second = epoch_order(loader, 1);
  CHECK(first.size() == 21);
  CHECK(std::set<int64_t>(first.begin(), first.end()).size() == 21);
  CHECK(first != second);
  CHECK(epoch_order(loader, 0) == first);  // an epoch is a function of (seed, epoch)
  options.prefetch = false;
  DataLoader in_line(dataset, options);
  CHECK(epoch_order(in_line, 1) == second);
  options.drop_last = true;
  DataLoader dropping(dataset, options);
  CHECK(epoch_order(dropping, 0).size() == 20);
}

TEST_CASE("values/loader: random transforms do not depend on the thread") {
  const ShapesDataset dataset = tiny_shapes();
  LoaderOptions options;
  options.batch_size = 3;
  options.transform = random_horizontal_flip(0.5);
  DataLoader prefetching(dataset, options);
  options.prefetch = false;
  DataLoader in_line(dataset, options);
  int64_t batches = 0;
  while (auto a = prefetching.next()) {
    auto b = in_line.next();
    REQUIRE(b.has_value());
    CHECK(minidet::test::max_abs_diff(a->images, b->images) == 0.0);
    for (size_t i = 0; i < a->boxes.size(); ++i) CHECK(minidet::test::max_abs_diff(a->boxes[i], b->boxes[i]) == 0.0);
    ++batches;
  }
  CHECK(batches == 7);
}

TEST_CASE("values/loader: Batch::flipped names exactly the images the transform mirrored") {
  const ShapesDataset dataset = tiny_shapes();
  LoaderOptions options;
  options.batch_size = 3;
  options.transform = random_horizontal_flip(0.5);
  DataLoader loader(dataset, options);
  int64_t flipped = 0, kept = 0;
  while (auto batch = loader.next()) {
    REQUIRE(batch->flipped.size() == batch->indices.size());
    for (int64_t b = 0; b < batch->size(); ++b) {
      // The pixels decide: the batch image is the dataset's image, or its mirror.
      Sample expected = dataset.get(batch->indices[b]);
      if (batch->flipped[b]) expected = horizontal_flip(std::move(expected));
      const Batch alone = collate({expected}, {batch->indices[b]});
      CHECK(minidet::test::max_abs_diff(batch->images.select(0, b), alone.images.select(0, 0)) == 0.0);
      CHECK(minidet::test::max_abs_diff(batch->boxes[b], alone.boxes[0]) == 0.0);
      (batch->flipped[b] ? flipped : kept) += 1;
    }
  }
  CHECK(flipped > 0);  // 21 images at p = 0.5: both kinds occur
  CHECK(kept > 0);
}

TEST_CASE("errors/loader: a failing sample reaches the caller") {
  const BrokenDataset dataset;
  LoaderOptions options;
  options.batch_size = 2;
  options.shuffle = false;
  DataLoader loader(dataset, options);
  CHECK(loader.next().has_value());  // samples 0, 1; batch 2 (samples 4, 5) is not ready to fail yet
  CHECK(loader.next().has_value());
  CHECK_THROWS_CONTAINING(loader.next(), "sample 5 is unreadable");
  options.batch_size = 0;
  CHECK_THROWS_CONTAINING(DataLoader(dataset, options), "batch_size must be at least 1");
}
