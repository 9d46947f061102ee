// minidet's checkpoints: nn::save_checkpoint's format (atomic write, checksum) holding the training state
// of nn::capture_training_state plus two entries of the program's own:
//   "minidet.config"      the RunConfig as JSON bytes (uint8), so a checkpoint alone rebuilds its model;
//   "minidet.best_map50"  the best mAP@0.5 so far, so a resumed run keeps choosing best.ckpt correctly.
// A run folder holds last.ckpt (the latest state: at step 0, at each evaluation, at the end, on Ctrl-C) and
// best.ckpt (the state with the best held-out mAP@0.5). Both are replaced atomically (see train.cpp).
#pragma once

#include <memory>
#include <string>

#include "core/device.h"
#include "engine/run_config.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "nn/checkpoint/checkpoint.h"

namespace minidet::engine {

constexpr const char* kBestMapEntry = "minidet.best_map50";

// A checkpoint file, or a run folder (then its best.ckpt when `prefer_best` and it exists, else last.ckpt).
std::string checkpoint_path(const std::string& file_or_folder, bool prefer_best);

// Loads the file and its RunConfig; refuses, in one line, a file that is not a minidet training checkpoint.
struct RunCheckpoint {
  std::string path;
  nn::Checkpoint checkpoint;
  RunConfig config;
  double best_map50 = -1;
};
RunCheckpoint load_run_checkpoint(const std::string& path);

// The detector of a checkpoint with its weights, on `device`, in eval mode.
std::unique_ptr<models::FasterRCNN> load_model(const RunCheckpoint& checkpoint, Device device);

// "auto" picks the GPU when there is one; "cuda" without a GPU is an error.
Device pick_device(const std::string& name);
// Sets OpenMP's thread count when threads > 0 (and OpenMP is there). With 0 (all cores) and several ranks on
// this machine (mpirun), each rank takes its share of the cores instead, so that N processes do not each
// start a thread per core and fight over them.
void set_threads(int threads, int ranks_on_this_machine = 1);

}  // namespace minidet::engine
