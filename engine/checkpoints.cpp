// See checkpoints.h.
#include "engine/checkpoints.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/cuda/availability.h"
#include "core/error.h"

namespace minidet::engine {

std::string checkpoint_path(const std::string& file_or_folder, bool prefer_best) {
  namespace fs = std::filesystem;
  MINIDET_CHECK(fs::exists(file_or_folder), "no checkpoint or run folder '", file_or_folder, "'");
  if (!fs::is_directory(file_or_folder)) return file_or_folder;
  const fs::path folder(file_or_folder);
  if (prefer_best && fs::exists(folder / "best.ckpt")) return (folder / "best.ckpt").string();
  MINIDET_CHECK(fs::exists(folder / "last.ckpt"), "run folder '", file_or_folder, "' has no last.ckpt");
  return (folder / "last.ckpt").string();
}

RunCheckpoint load_run_checkpoint(const std::string& path) {
  RunCheckpoint result;
  result.path = path;
  result.checkpoint = nn::load_checkpoint(path);
  MINIDET_CHECK(result.checkpoint.has(kConfigEntry), "'", path,
                "' is not a minidet training checkpoint (it has no '", kConfigEntry, "' entry)");
  result.config = RunConfig::from_tensor(result.checkpoint.get(kConfigEntry), "checkpoint '" + path + "'");
  if (result.checkpoint.has(kBestMapEntry))
    result.best_map50 = result.checkpoint.get(kBestMapEntry).to(kFloat64).item<double>();
  return result;
}

std::unique_ptr<models::FasterRCNN> load_model(const RunCheckpoint& checkpoint, Device device) {
  auto model = std::make_unique<models::FasterRCNN>(checkpoint.config.detector);
  try {
    nn::restore_training_state(checkpoint.checkpoint, *model, nullptr, nullptr, nullptr);
  } catch (const Error& e) {
    // The config rebuilt a model whose parameters do not fit the weights, or the counters are impossible: the
    // file was edited or mixed up.
    MINIDET_FAIL("checkpoint '", checkpoint.path, "' cannot be loaded into the model of its own config (",
                 e.message(), ")");
  }
  model->to(device);
  model->eval();
  return model;
}

Device pick_device(const std::string& name) {
  if (name == "auto") return cuda::is_available() ? Device::parse("cuda") : Device::cpu();
  const Device device = Device::parse(name);
  MINIDET_CHECK(!device.is_cuda() || cuda::is_available(), "--device cuda but no GPU is available",
                " (use --device cpu or auto)");
  return device;
}

void set_threads(int threads, int ranks_on_this_machine) {
  // OpenMP starts every thread asked for, each with its own stack: tens of thousands of them exhaust the
  // process's limits and crash the runtime, and past one per core they only take turns.
  constexpr int kMaxThreads = 1024;
  MINIDET_CHECK(threads <= kMaxThreads, "--threads ", threads, " is more than ", kMaxThreads, " (this machine has ",
                std::thread::hardware_concurrency(), " cores; 0 uses them all)");
#ifdef _OPENMP
  if (threads == 0 && ranks_on_this_machine > 1) threads = std::max(1, omp_get_num_procs() / ranks_on_this_machine);
  if (threads > 0) omp_set_num_threads(threads);
#else
  (void)threads;
  (void)ranks_on_this_machine;
#endif
}

}  // namespace minidet::engine
