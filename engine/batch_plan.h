// batches.jsonl: which images each training step trained on, in which order, and which of them the random
// flip mirrored. One JSON line per step, written by rank 0:
//   {"step":1,"epoch":0,"indices":[12,3,...],"image_ids":[13,4,...],"flipped":[true,false,...]}
// indices are the training dataset's indices, image_ids what its COCO file calls the images (export_shapes_coco
// writes the synthetic shapes with id = index + 1), flipped the transform's own record (Sample::flipped), not
// a re-derivation. Another implementation (bench/detector_torch.py --plan) replays the file to train on the
// very batches minidet trained on. A flipped image is mirrored left-right: pixel column x comes from W - 1 - x,
// a box (x1, y1, x2, y2) becomes (W - x2, y1, W - x1, y2).
//
// Data parallel: the line is the global batch, the ranks' parts concatenated in rank order, as one process
// with the whole batch would list it. The ranks buffer their parts and rank 0 gathers them only at the steps
// where they meet anyway (logged, evaluated or stopping steps), so the plan adds no synchronisation of its own.
//
// Resume: like metrics.jsonl, the file is rewritten atomically keeping the lines of steps up to the
// checkpoint's (and no line cut by a crash); the steps after it are trained again and written again. The
// lines reach the file before any checkpoint of their step is saved, so a checkpoint's steps are all there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/loader/loader.h"
#include "dist/process_group.h"

namespace minidet::engine {

class BatchPlan {
 public:
  // Every rank constructs it; rank 0 opens `path`, keeping the lines with step <= resume_step (0 for a
  // fresh run: an empty file).
  BatchPlan(std::string path, int64_t resume_step, dist::ProcessGroup& group);

  // This rank's part of step `step`'s batch, held until the next flush.
  void record(int64_t step, int64_t epoch, const data::Batch& batch);
  // Writes the recorded steps. With several ranks a collective: every rank calls it at the same steps.
  void flush();

 private:
  std::string path_;
  dist::ProcessGroup& group_;
  // Per recorded step: step, epoch, count, then (index, image_id, flipped) per image; doubles, as
  // gather_to_main carries them (exact for integers below 2^53).
  std::vector<double> pending_;
  int64_t pending_steps_ = 0;
};

}  // namespace minidet::engine
