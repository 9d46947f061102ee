// The training and validation datasets a RunConfig names: the synthetic shapes (nothing to download) or a
// pair of COCO instances files with their image folders. COCO images keep their own sizes: the loader pads
// a batch to its largest image and the model is told each image's real size, so nothing is resized.
#pragma once

#include <memory>
#include <string>

#include "data/dataset/dataset.h"
#include "engine/run_config.h"

namespace minidet::engine {

struct Datasets {
  std::unique_ptr<data::Dataset> train;  // null when only validation data was asked for
  std::unique_ptr<data::Dataset> val;
};

// Opens the data of `config` and, for training, checks that its classes fit the detector. Throws a message
// that names the file and the problem.
Datasets open_datasets(const RunConfig& config, bool need_train);
// A COCO validation set given on the command line, whose classes must be the checkpoint's.
std::unique_ptr<data::Dataset> open_coco_validation(const RunConfig& config, const std::string& json_path,
                                                    const std::string& image_dir);
// Sets detector.num_classes, classes and category_ids from the training data (the synthetic shapes use num_classes of
// the detector to pick how many shapes to draw).
void adopt_classes(RunConfig& config, const data::Dataset& train);

}  // namespace minidet::engine
