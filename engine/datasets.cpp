// See datasets.h. The shapes are sized by the data section; a COCO file's categories become the classes.
#include "engine/datasets.h"

#include "core/error.h"
#include "data/coco/coco_dataset.h"
#include "data/shapes/rotated_shapes_dataset.h"
#include "data/shapes/shapes_dataset.h"

namespace minidet::engine {

namespace {

data::ShapesOptions shapes_options(const RunConfig& config) {
  data::ShapesOptions shapes;
  shapes.image_width = shapes.image_height = config.data.image_size;
  shapes.num_classes = config.detector.num_classes;
  shapes.train_images = config.data.train_images;
  shapes.test_images = config.data.test_images;
  return shapes;
}

data::RotatedShapesOptions rotated_shapes_options(const RunConfig& config) {
  data::RotatedShapesOptions shapes;
  shapes.image_width = shapes.image_height = config.data.image_size;
  shapes.num_classes = config.detector.num_classes;
  shapes.train_images = config.data.train_images;
  shapes.test_images = config.data.test_images;
  shapes.min_thickness = config.data.min_thickness;
  return shapes;
}

// The synthetic split of `config`: the shapes, or the rotated shapes.
std::unique_ptr<data::Dataset> open_synthetic(const RunConfig& config, data::Split split) {
  if (config.data.synthetic == SyntheticData::kRotatedShapes) {
    MINIDET_CHECK(config.detector.num_classes >= 1 && config.detector.num_classes <= data::kNumRotatedShapeKinds,
                  "the synthetic rotated shapes have 1 to ", data::kNumRotatedShapeKinds,
                  " classes; detector.num_classes is ", config.detector.num_classes);
    return std::make_unique<data::RotatedShapesDataset>(split, rotated_shapes_options(config));
  }
  MINIDET_CHECK(config.detector.num_classes >= 1 && config.detector.num_classes <= 5,
                "the synthetic shapes have 1 to 5 classes; detector.num_classes is ", config.detector.num_classes);
  return std::make_unique<data::ShapesDataset>(split, shapes_options(config));
}

std::unique_ptr<data::Dataset> open_coco(const std::string& json_path, const std::string& image_dir) {
  auto dataset = std::make_unique<data::CocoDataset>(json_path, image_dir);
  MINIDET_CHECK(dataset->size() > 0, "dataset '", json_path, "' has no images");
  MINIDET_CHECK(dataset->num_classes() > 0, "dataset '", json_path, "' has no categories");
  return dataset;
}

}  // namespace

Datasets open_datasets(const RunConfig& config, bool need_train) {
  Datasets sets;
  if (!config.data.is_coco()) {
    if (need_train) sets.train = open_synthetic(config, data::Split::kTrain);
    sets.val = open_synthetic(config, data::Split::kTest);
    return sets;
  }
  if (need_train) sets.train = open_coco(config.data.train_json, config.data.train_images_dir);
  sets.val = open_coco(config.data.val_json, config.data.val_images_dir);
  if (sets.train) {
    MINIDET_CHECK(sets.val->class_names() == sets.train->class_names(), "validation data '", config.data.val_json,
                  "' has other categories than the training data '", config.data.train_json, "'");
  }
  return sets;
}

std::unique_ptr<data::Dataset> open_coco_validation(const RunConfig& config, const std::string& json_path,
                                                    const std::string& image_dir) {
  auto dataset = open_coco(json_path, image_dir);
  MINIDET_CHECK(dataset->num_classes() == config.detector.num_classes,
                "dataset '", json_path, "' has ", dataset->num_classes(), " categories but the model was trained on ",
                config.detector.num_classes);
  return dataset;
}

void adopt_classes(RunConfig& config, const data::Dataset& train) {
  config.classes = train.class_names();
  config.detector.num_classes = train.num_classes();
  config.category_ids.clear();
  for (int64_t label = 1; label <= train.num_classes(); ++label) config.category_ids.push_back(train.category_id(label));
}

}  // namespace minidet::engine
