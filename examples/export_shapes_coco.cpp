// Exports the synthetic shapes dataset as COCO: <out>/train.json, <out>/test.json and the PNG images in
// <out>/train/ and <out>/test/. Any COCO tool (pycocotools, `minidet eval --gt --results`) can then read them.
//
//   export_shapes_coco --out /tmp/shapes --size 64 --classes 3 --train 1000 --test 200 --seed 0
//
// The data `minidet train` uses by default (data.image_size 128, 2000 + 200 images, 3 classes, noise 24; the
// dataset seed is always 0: schedule.seed changes the weights, the order and the flips, never the images):
//
//   export_shapes_coco --out /tmp/shapes128 --size 128 --train 2000 --test 200 --seed 0
//
// writes exactly those images (PNG, lossless), boxes, labels and ids (image id = dataset index + 1), so
// another implementation, such as bench/detector_torch.py --data, trains and evaluates on the very same data
// (test_minidet_cli checks the pixels and the losses bit for bit).
//
// --rotated exports the synthetic rotated shapes instead (data/shapes/rotated_shapes_dataset.h), their boxes
// in detectron2's XYWHA form with the angle in degrees (docs/rotated.md); the data of
// examples/configs/rotated_shapes.json:
//
//   export_shapes_coco --rotated --out /tmp/rotated128 --size 128 --train 2000 --test 200
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "data/coco/coco_format.h"
#include "data/shapes/rotated_shapes_dataset.h"
#include "data/shapes/shapes_dataset.h"

using namespace minidet::data;

int main(int argc, char** argv) {
  CLI::App app{"Export the synthetic shapes dataset in COCO format"};
  std::string out = "shapes_coco";
  ShapesOptions options;
  int64_t size = 64;
  app.add_option("--out", out, "output folder")->capture_default_str();
  app.add_option("--size", size, "image width and height in pixels")->capture_default_str();
  app.add_option("--classes", options.num_classes, "number of shape classes (1..5)")->capture_default_str();
  app.add_option("--train", options.train_images, "train images")->capture_default_str();
  app.add_option("--test", options.test_images, "test images")->capture_default_str();
  app.add_option("--seed", options.seed, "dataset seed")->capture_default_str();
  app.add_option("--noise", options.noise_amplitude, "noise amplitude (0..255)")->capture_default_str();
  bool rotated = false;
  double min_thickness = 4.0;  // minidet train's data.min_thickness
  app.add_flag("--rotated", rotated, "the rotated shapes (rectangles, ellipses, bars; 1..3 classes), XYWHA boxes");
  app.add_option("--min-thickness", min_thickness, "with --rotated: the thinnest short side in pixels")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  options.image_width = options.image_height = size;
  RotatedShapesOptions rotated_options;
  rotated_options.image_width = rotated_options.image_height = size;
  rotated_options.num_classes = options.num_classes;
  rotated_options.train_images = options.train_images;
  rotated_options.test_images = options.test_images;
  rotated_options.seed = options.seed;
  rotated_options.noise_amplitude = options.noise_amplitude;
  rotated_options.min_thickness = min_thickness;

  try {
    for (Split split : {Split::kTrain, Split::kTest}) {
      std::unique_ptr<Dataset> opened;
      if (rotated)
        opened = std::make_unique<RotatedShapesDataset>(split, rotated_options);
      else
        opened = std::make_unique<ShapesDataset>(split, options);
      const Dataset& dataset = *opened;
      const std::filesystem::path json = std::filesystem::path(out) / (std::string(split_name(split)) + ".json");
      const std::filesystem::path images = std::filesystem::path(out) / split_name(split);
      export_coco(dataset, json.string(), images.string());
      const CocoInstances written = coco_instances_from_dataset(dataset);
      std::printf("%-5s %5zu images, %5zu boxes -> %s (images in %s)\n", split_name(split), written.images.size(),
                  written.annotations.size(), json.c_str(), images.c_str());
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "export_shapes_coco: %s\n", error.what());
    return 1;
  }
  return 0;
}
