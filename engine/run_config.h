// RunConfig: everything a `minidet train` run is made of, in one JSON file: the detector (DetectorConfig),
// the schedule (steps, batch, learning rate...), the data (synthetic shapes or COCO files) and the class
// names. The run folder's config.json holds it, and every checkpoint embeds it, so `minidet eval` and
// `minidet detect` rebuild the exact model from a checkpoint alone.
//
//   { "schedule": { "steps": 750, "batch": 8, "lr": 0.003, ... },
//     "data":     { "image_size": 128, "train_images": 2000, ..., "train_json": "", ... },
//     "detector": { DetectorConfig's keys (models/faster_rcnn/detector_config.h) },
//     "classes":  [ "square", "circle", "triangle" ], "category_ids": [1, 2, 3] }   (derived from the data)
//
// Overrides use the same dotted names: --set schedule.steps=300 --set detector.rpn.train.post_nms_top_n=500.
// A key nobody knows is refused by its full name, so a typo never silently trains the default. Reading,
// writing and --set all walk one list of the keys (core/config_visitor.h).
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/faster_rcnn/detector_config.h"

namespace minidet::engine {

// The optimisation schedule. 750 steps is the shortest of the schedules tried at which every seed's held-out
// mAP@0.5 passes 0.95, minidet's and torchvision's alike (docs/parity.md#the-schedule); docs/detector.md
// gives its training time on a CPU and a GPU.
struct Schedule {
  int64_t steps = 750;
  int64_t batch = 8;
  double lr = 3e-3;            // AdamW's peak learning rate
  double weight_decay = 1e-4;  // decoupled (AdamW)
  int64_t warmup = 100;        // linear warm-up steps, capped at steps / 5 so short runs still warm up briefly
  double min_lr_factor = 0.01; // the cosine ends at lr * min_lr_factor
  int64_t eval_every = 250;    // evaluate (and checkpoint) every N steps; the last step is always evaluated
  int64_t log_every = 20;      // a metrics.jsonl line (and a console line off a terminal) every N steps
  double flip_probability = 0.5;
  uint64_t seed = 0;           // weights, data order, flips and the samplers
  int64_t detection_images = 4;  // validation images drawn into detections/ at each evaluation
  bool cuda_graphs = true;       // on a GPU, replay the backbone, the RPN head and the box stage as CUDA graphs
                                 // (same results, engine/cuda_graphs.h)
};

// Which synthetic images: axis-aligned shapes (data/shapes/shapes_dataset.h) or rotated rectangles, ellipses
// and bars with their rotated boxes (data/shapes/rotated_shapes_dataset.h), for detector.box_type = rotated.
enum class SyntheticData { kShapes, kRotatedShapes };

// Where images come from: the synthetic shapes (train_json empty) or COCO instances files.
struct DataConfig {
  SyntheticData synthetic = SyntheticData::kShapes;
  int64_t image_size = 128;     // synthetic images are image_size x image_size
  int64_t train_images = 2000;  // synthetic training split
  int64_t test_images = 200;    // synthetic held-out split
  double min_thickness = 4.0;   // rotated shapes: the thinnest short side, in pixels (bars are 4 to 10 times
                                // longer); thinner bars ask for sub-pixel accuracy at rotated IoU 0.5
  std::string train_json, train_images_dir;  // COCO training data (both or neither)
  std::string val_json, val_images_dir;      // COCO validation data (both or neither)
  bool is_coco() const { return !train_json.empty(); }
};

struct RunConfig {
  Schedule schedule;
  DataConfig data;
  models::DetectorConfig detector;
  std::vector<std::string> classes;     // names of labels 1..C, filled from the training data
  std::vector<int64_t> category_ids;    // the COCO category id of labels 1..C (1..C for the shapes)

  std::string to_json(int indent = 2) const;
  // Starts from the defaults and applies every key of the text (unknown keys refused by dotted name).
  static RunConfig from_json(const std::string& text, const std::string& where);
  static RunConfig load(const std::string& path);
  // One "section.key=value" override; the value is JSON, or a bare word read as a string.
  void set(const std::string& assignment);
  // Throws on values that cannot train (steps < 1, a COCO json without its image folder, ...).
  void validate() const;

  // The config as a uint8 tensor of its JSON text, the form a checkpoint entry takes, and back.
  Tensor to_tensor() const;
  static RunConfig from_tensor(const Tensor& bytes, const std::string& where);
};

// The checkpoint entry that holds the RunConfig.
constexpr const char* kConfigEntry = "minidet.config";

}  // namespace minidet::engine
