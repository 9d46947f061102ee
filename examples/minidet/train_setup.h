// What `minidet train` settles before its first step: the resolved RunConfig (defaults, --config, --set,
// the data flags; or a checkpoint's own config when resuming), the run folder, and the checkpoint to resume.
#pragma once

#include <optional>
#include <string>

#include "engine/checkpoints.h"
#include "dist/process_group.h"
#include "examples/minidet/commands.h"
#include "engine/datasets.h"

namespace minidet::cli {

struct TrainSetup {
  RunConfig config;
  Datasets data;
  std::string folder;                   // the run folder, created
  std::optional<RunCheckpoint> resume;  // set when continuing a run
};

// Resolves everything and writes config.json. Throws (one line) on a bad flag, a missing file, a run folder
// that already holds a run, or a --set on resume that would change the model or its data.
// Under mpirun every rank resolves the same setup (rank 0's default folder name is broadcast, so a second
// boundary between the ranks' clocks cannot split the run); only rank 0 creates the folder and writes.
TrainSetup prepare_training(const TrainArgs& args, dist::ProcessGroup& group);

}  // namespace minidet::cli
