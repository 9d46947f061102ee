// Bad inputs beyond the ops: nn layers, optimizers, schedules, checkpoints and their restore, the datasets,
// the loader and the transforms. Each is refused with an error that names the function or class and what
// was wrong; nothing crashes, hangs or half-applies.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/factories.h"
#include "data/coco/coco_dataset.h"
#include "data/coco/coco_format.h"
#include "data/image/image_io.h"
#include "data/loader/loader.h"
#include "data/shapes/shapes_dataset.h"
#include "data/transforms/transforms.h"
#include "models/faster_rcnn/detector_config.h"
#include "nn/checkpoint/checkpoint.h"
#include "nn/nn.h"
#include "tests/data/temp_dir.h"
#include "tests/errors/bad_call.h"
#include "tests/support.h"

using namespace minidet;

using test::BadCall;

TEST_CASE("errors/module_table: layers refuse bad sizes and bad inputs") {
  const std::vector<BadCall> rows = {
      {"Linear", "zero in-features", [] { nn::Linear(0, 3); }},
      {"Linear", "negative out-features", [] { nn::Linear(3, -1); }},
      {"linear", "an input of the wrong width", [] { nn::Linear(3, 2).forward(rand({4, 5})); }},
      {"Conv2d", "kernel size 0", [] { nn::Conv2d(3, 8, 0); }},
      {"Conv2d", "zero channels", [] { nn::Conv2d(0, 8, 3); }},
      {"conv2d", "a 3-D input", [] { nn::Conv2d(3, 8, 3).forward(rand({3, 8, 8})); }},
      {"conv2d", "the wrong channel count", [] { nn::Conv2d(3, 8, 3).forward(rand({1, 4, 8, 8})); }},
      {"BatchNorm2d", "zero channels", [] { nn::BatchNorm2d(0); }},
      {"batch_norm2d", "the wrong channel count", [] { nn::BatchNorm2d(4).forward(rand({2, 3, 4, 4})); }},
      {"FrozenBatchNorm2d", "zero channels", [] { nn::FrozenBatchNorm2d(0); }},
      {"DeformConv2d", "channels not divisible by offset groups",
       [] { nn::DeformConv2d(3, 4, 3, nn::DeformConv2dLayerOptions().set_offset_groups(2)); }},
      {"DeformConv2d", "a float64 input for a float32 layer", [] { nn::DeformConv2d(2, 4, 3).forward(rand({1, 2, 6, 6}, kFloat64)); }},
      {"max_pool2d", "a kernel larger than the input", [] { nn::MaxPool2d(Pool2dOptions(9)).forward(rand({1, 1, 4, 4})); }},
      {"flatten", "start dim after end dim", [] { nn::Flatten(2, 1).forward(rand({2, 3, 4})); }},
      {"Sequential", "a null layer", [] { nn::Sequential({nullptr}); }},
  };
  test::check_bad_calls(rows);
}

TEST_CASE("errors/module_table: optimizers, schedules and gradient clipping") {
  auto params = [] {
    Tensor p = rand({3});
    p.requires_grad_(true);
    return std::vector<Tensor>{p};
  };
  auto group = [&](double lr, double decay = 0.0) { return std::vector<nn::ParamGroup>{nn::ParamGroup{params(), lr, decay}}; };
  const std::vector<BadCall> rows = {
      {"finite lr >= 0, got -0.1", "a negative learning rate", [&] { nn::SGD(group(-0.1)); }},
      {"SGD", "negative momentum", [&] { nn::SGD(group(0.1), nn::SGDOptions{-0.5, 0.0, false}); }},
      {"SGD", "nesterov without momentum", [&] { nn::SGD(group(0.1), nn::SGDOptions{0.0, 0.0, true}); }},
      {"finite weight_decay >= 0, got -1", "negative weight decay", [&] { nn::SGD(group(0.1, -1.0)); }},
      {"Adam", "beta1 = 1", [&] { nn::Adam(group(0.1), nn::AdamOptions{1.0, 0.999, 1e-8, false}); }},
      {"Adam", "eps < 0", [&] { nn::Adam(group(0.1), nn::AdamOptions{0.9, 0.999, -1e-8, false}); }},
      {"finite lr >= 0, got nan", "a NaN learning rate", [&] { nn::Adam(group(std::nan(""))); }},
      {"is not a leaf tensor that requires grad", "a parameter that does not require grad", [] { nn::SGD(std::vector<nn::ParamGroup>{nn::ParamGroup{{rand({3})}, 0.1}}); }},
      {"parameter 0 is undefined", "an undefined parameter", [] { nn::SGD(std::vector<nn::ParamGroup>{nn::ParamGroup{{Tensor()}, 0.1}}); }},
      {"optimizer: no parameter groups", "no parameter groups", [] { nn::SGD(std::vector<nn::ParamGroup>{}); }},
      {"WarmupMultiStepLR", "milestones out of order", [&] {
         nn::SGD sgd(group(0.1));
         nn::WarmupMultiStepLR(sgd, {20, 10});
       }},
      {"WarmupCosineLR", "zero total iterations", [&] {
         nn::SGD sgd(group(0.1));
         nn::WarmupCosineLR(sgd, 0);
       }},
      {"clip_grad_norm_", "a negative max norm", [&] { nn::clip_grad_norm_(params(), -1.0); }},
  };
  test::check_bad_calls(rows);
}

TEST_CASE("errors/module_table: checkpoints that do not fit the model change nothing") {
  test::TempDir dir;
  nn::Linear model(3, 2), other(4, 2);
  const std::string path = dir.file("model.ckpt");
  nn::save_checkpoint(path, nn::capture_training_state(model, nullptr, nullptr, nullptr, {5, 1}));
  const Tensor before = other.parameters()[0].detach().clone();
  CHECK_THROWS_CONTAINING(nn::restore_training_state(nn::load_checkpoint(path), other, nullptr, nullptr, nullptr),
                          "in the file but");
  CHECK(other.parameters()[0].to_vector<float>() == before.to_vector<float>());
  nn::Checkpoint empty;
  CHECK_THROWS_CONTAINING(nn::restore_training_state(empty, model, nullptr, nullptr, nullptr), "no entry named");
  CHECK_THROWS_CONTAINING(nn::load_checkpoint(dir.file("missing.ckpt")), "missing.ckpt");
  CHECK_THROWS_CONTAINING(nn::load_checkpoint(dir.path()), "is not a file");
  CHECK_THROWS_CONTAINING(nn::save_checkpoint(dir.file("no/such/dir/model.ckpt"), empty), "model.ckpt");
  CHECK_THROWS_CONTAINING(empty.get("weight"), "weight");
}

TEST_CASE("errors/module_table: datasets, the loader, transforms and image files") {
  test::TempDir dir;
  data::ShapesOptions tiny;
  tiny.image_width = 8;
  data::ShapesOptions classes;
  classes.num_classes = 6;
  const data::ShapesDataset shapes(data::Split::kTest, {});
  const std::string json = dir.write("bad.json", R"({"images": [{"id": 1, "file_name": "a.png", "width": 4, "height": 4}],
      "annotations": [{"id": 1, "image_id": 2, "category_id": 1, "bbox": [0, 0, 2, 2]}],
      "categories": [{"id": 1, "name": "square"}]})");
  const std::string dup = dir.write("dup.json", R"({"images": [{"id": 1, "file_name": "a.png", "width": 4, "height": 4},
      {"id": 1, "file_name": "b.png", "width": 4, "height": 4}], "categories": [{"id": 1, "name": "square"}]})");
  const std::string no_file = dir.write("nofile.json", R"({"images": [{"id": 1, "file_name": "absent.png", "width": 4, "height": 4}],
      "categories": [{"id": 1, "name": "square"}]})");
  const std::vector<BadCall> rows = {
      {"ShapesDataset", "images of 8 px", [&] { data::ShapesDataset(data::Split::kTrain, tiny); }},
      {"ShapesDataset", "6 classes", [&] { data::ShapesDataset(data::Split::kTrain, classes); }},
      {"ShapesDataset", "an index past the end", [&] { shapes.get(shapes.size()); }},
      {"ShapesDataset", "a negative index", [&] { shapes.get(-1); }},
      {"DataLoader", "batch size 0", [&] { data::DataLoader(shapes, data::LoaderOptions{0}); }},
      {"annotations[0]", "an annotation of an unknown image", [&] { data::read_coco_instances(json); }},
      {"appears more than once", "two images with one id", [&] { data::read_coco_instances(dup); }},
      {"absent.png", "an image file that is not there", [&] { data::CocoDataset(no_file, dir.path()).get(0); }},
      {"missing.json", "a missing file", [&] { data::read_coco_instances(dir.file("missing.json")); }},
      {"is not a file", "a directory", [&] { data::read_coco_instances(dir.path()); }},
      {"resize", "a zero width", [&] { data::resize(shapes.get(0), 0, 5); }},
      {"read_image", "a text file", [&] { data::read_image(dir.write("not_an_image.png", "hello")); }},
      {"write_png", "an empty image", [&] { data::write_png(data::Image(), dir.file("empty.png")); }},
  };
  test::check_bad_calls(rows);
  CHECK_THROWS_CONTAINING(models::DetectorConfig::load(dir.path()), "is not a file");
}
