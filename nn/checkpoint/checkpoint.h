// Checkpoints: named tensors in one binary file, written so that a crash never corrupts the previous one.
//
// The format (docs/checkpoint-format.md) is a magic number, a format version, the entries (name, dtype,
// shape, raw little-endian data) and an FNV-1a 64-bit checksum of everything before it. save_checkpoint
// writes "<path>.tmp", flushes and fsyncs it, then renames it over <path>: rename is atomic on POSIX file
// systems, so <path> is always either the old complete file or the new complete file.
//
// load_checkpoint refuses a wrong magic, an unknown version, a truncated file, a bad checksum or malformed
// entries, with an error that names the file and the problem. It also refuses a float entry that holds NaN
// or Inf, naming the entry and the first such index: weights or optimizer moments of a run that diverged
// would otherwise resume, evaluate or detect as garbage without a word. A tool that inspects such a file
// on purpose passes NonFiniteValues::kAllow.
//
// Training state: capture_training_state() gathers everything needed to resume bit for bit (model
// parameters and buffers, optimizer state and learning rates, scheduler step, generator state, step and
// epoch); restore_training_state() checks every name and shape first, and that learning rates are finite
// numbers >= 0 and step and epoch counters >= 0; it changes nothing on a mismatch.
#pragma once

#include <functional>
#include <string>

#include "core/generator.h"
#include "nn/module/module.h"

namespace minidet::nn {

class Optimizer;
class LRScheduler;

struct Checkpoint {
  NamedTensors entries;

  void put(const std::string& name, const Tensor& tensor);
  bool has(const std::string& name) const;
  const Tensor& get(const std::string& name) const;  // throws naming the missing entry
};

constexpr char kCheckpointMagic[8] = {'M', 'D', 'E', 'T', 'C', 'K', 'P', 'T'};
constexpr uint32_t kCheckpointVersion = 1;

// `before_rename` is a test hook (see write_file_atomically): it runs when "<path>.tmp" is complete.
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint,
                     const std::function<void()>& before_rename = {});
enum class NonFiniteValues { kRefuse, kAllow };
Checkpoint load_checkpoint(const std::string& path, NonFiniteValues non_finite = NonFiniteValues::kRefuse);

struct TrainingProgress {
  int64_t step = 0;
  int64_t epoch = 0;
};

// Any of optimizer, scheduler, generator may be null (then it is neither saved nor restored).
Checkpoint capture_training_state(const Module& model, const Optimizer* optimizer, const LRScheduler* scheduler,
                                  const Generator* generator, TrainingProgress progress);
TrainingProgress restore_training_state(const Checkpoint& checkpoint, Module& model, Optimizer* optimizer,
                                        LRScheduler* scheduler, Generator* generator);

}  // namespace minidet::nn
