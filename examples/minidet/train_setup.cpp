// See train_setup.h. Resuming keeps the checkpoint's config: only schedule keys may change on resume
// (say schedule.steps, to train longer), because a different model or data would not be a continuation.
#include "examples/minidet/train_setup.h"

#include <ctime>
#include <filesystem>

#include "core/error.h"
#include "core/file_write.h"

namespace minidet::cli {

namespace fs = std::filesystem;

namespace {

std::string timestamp_folder() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char name[32];
  std::strftime(name, sizeof name, "runs/%Y%m%d-%H%M%S", &local);
  return name;
}

// Paths are stored absolute, so `minidet eval` finds the run's validation data from any directory.
void apply_data_flags(const TrainArgs& args, RunConfig& config) {
  DataConfig& d = config.data;
  if (!args.train_json.empty()) d.train_json = args.train_json;
  if (!args.train_images.empty()) d.train_images_dir = args.train_images;
  if (!args.val_json.empty()) d.val_json = args.val_json;
  if (!args.val_images.empty()) d.val_images_dir = args.val_images;
  for (std::string* path : {&d.train_json, &d.train_images_dir, &d.val_json, &d.val_images_dir})
    if (!path->empty()) *path = fs::absolute(*path).lexically_normal().string();
}

void write_config(const RunConfig& config, const std::string& folder) {
  write_file_atomically("", folder + "/config.json", config.to_json() + "\n");
}

// A process killed while writing a file leaves "<name>.tmp" (core/file_write.h). Nothing reads it, so the
// next run in the folder removes it: only the run's own names, since --out may be a folder that holds
// other files. A folder that refuses (read-only) keeps it, and the write that follows reports why.
void remove_stale_temp_files(const std::string& folder) {
  std::error_code ec;
  for (const char* name :
       {"last.ckpt.tmp", "best.ckpt.tmp", "config.json.tmp", "metrics.jsonl.tmp", "batches.jsonl.tmp"})
    fs::remove(fs::path(folder) / name, ec);
}

// The checkpoint's config with the --set overrides; anything but the schedule must stay as trained.
RunConfig resumed_config(const TrainArgs& args, const RunCheckpoint& checkpoint) {
  MINIDET_CHECK(args.config_path.empty(), "--resume continues a run with its own config; leave out --config");
  MINIDET_CHECK(args.train_json.empty() && args.train_images.empty() && args.val_json.empty() &&
                    args.val_images.empty(),
                "--resume continues a run on its own data; leave out --train-json/--train-images/--val-json/"
                "--val-images");
  RunConfig config = checkpoint.config;
  for (const std::string& assignment : args.overrides) config.set(assignment);
  RunConfig schedule_only = checkpoint.config;
  schedule_only.schedule = config.schedule;
  MINIDET_CHECK(config.to_json() == schedule_only.to_json(), "checkpoint '", checkpoint.path,
                "' was trained with another config: on --resume only schedule.* keys may be changed");
  return config;
}

}  // namespace

TrainSetup prepare_training(const TrainArgs& args, dist::ProcessGroup& group) {
  TrainSetup setup;
  if (!args.resume.empty()) {
    setup.resume = load_run_checkpoint(checkpoint_path(args.resume, false));
    setup.config = resumed_config(args, *setup.resume);
    setup.folder = fs::path(setup.resume->path).parent_path().string();
    if (setup.folder.empty()) setup.folder = ".";
    MINIDET_CHECK(args.out.empty() || (fs::exists(args.out) && fs::equivalent(args.out, setup.folder)),
                  "--resume continues in its own run folder '", setup.folder, "'; leave out --out");
  } else {
    if (!args.config_path.empty()) setup.config = RunConfig::load(args.config_path);
    for (const std::string& assignment : args.overrides) setup.config.set(assignment);
    apply_data_flags(args, setup.config);
    setup.folder = args.out.empty() ? timestamp_folder() : args.out;
    group.broadcast(setup.folder, 0, "broadcast of the run folder name");
    MINIDET_CHECK(!fs::exists(fs::path(setup.folder) / "last.ckpt"), "run folder '", setup.folder,
                  "' already holds a run: continue it with --resume ", setup.folder, " or choose another --out");
  }
  setup.config.validate();
  setup.data = open_datasets(setup.config, true);
  if (setup.config.data.is_coco() && setup.resume) {
    MINIDET_CHECK(setup.data.train->class_names() == setup.config.classes, "training data '",
                  setup.config.data.train_json, "' has other categories than when the run started");
  } else {
    adopt_classes(setup.config, *setup.data.train);  // for the shapes, num_classes picked them: unchanged
  }
  setup.config.validate();
  if (group.is_main()) {  // the other ranks only read: rank 0 alone creates and writes
    std::error_code ec;
    fs::create_directories(setup.folder, ec);
    MINIDET_CHECK(!ec, "cannot create run folder ", setup.folder, ": ", ec.message());
    remove_stale_temp_files(setup.folder);
    write_config(setup.config, setup.folder);
  }
  return setup;
}

}  // namespace minidet::cli
