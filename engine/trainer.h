// Trainer: one training run of the detector, its state between steps and the step itself. The one engine
// that `minidet train` (examples/minidet/train.cpp), bench_detector and examples/train_detector.cpp run on;
// the loop around it, with its hooks, is train_loop.h. detectron2's SimpleTrainer.run_step is the model.
//
// A step, split where the loop must look between its halves:
//
//   forward()              the next batch (the loader's, random flips), FasterRCNN::forward_train's four
//                          losses and their total, recorded in the LossWatch (on a GPU they stay there:
//                          reading five numbers would make the host wait for the whole step)
//   read_losses()          when the loop needs the values (logging, evaluation, stopping; every step on the
//                          CPU): the watch's rows, averaged over ranks; a non-finite loss stops the run here,
//                          before the update, naming the op under anomaly mode
//   backward_and_update()  zero_grad, backward with the gradients averaged over ranks as they become ready
//                          (dist::DistributedDataParallel; one rank: plain backward), AdamW, the warm-up +
//                          cosine schedule
//
// What it builds from a RunConfig: the detector (weights from schedule.seed), AdamW (decoupled weight decay,
// Loshchilov & Hutter 2019) over every parameter, the schedule (warm-up capped at steps / 5 so short runs
// still warm up briefly), the loader over this rank's shard of the training set, and on a GPU the CUDA graphs
// of the fixed-shape part (cuda_graphs.h) unless schedule.cuda_graphs is false.
//
// Data parallel: schedule.batch is the global batch; each of N ranks trains on batch / N images of every
// global batch (the loader's shards), so N ranks take the steps one process would take, in the same data
// order, and a checkpoint does not depend on N.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/generator.h"
#include "data/dataset/dataset.h"
#include "data/loader/loader.h"
#include "dist/ddp.h"
#include "dist/process_group.h"
#include "engine/cuda_graphs.h"
#include "engine/loss_watch.h"
#include "engine/run_config.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "nn/checkpoint/checkpoint.h"
#include "nn/optim/adam.h"
#include "nn/optim/lr_scheduler.h"

namespace minidet::engine {

class Trainer {
 public:
  // `train` must outlive the trainer. detect_anomaly: read_losses names the op behind a non-finite loss.
  Trainer(const RunConfig& config, const data::Dataset& train, const Device& device,
          dist::ProcessGroup& group = dist::ProcessGroup::world(), bool detect_anomaly = false);
  ~Trainer();

  // The training state of a checkpoint (weights, BatchNorm's statistics, AdamW's moments, the schedule,
  // the samplers' generator), and the loader moved to the very batch the run would draw next: its epoch
  // restarted, with the batches already trained on skipped. Returns the checkpoint's step.
  int64_t restore(const nn::Checkpoint& checkpoint);
  // The state after `step` steps, to save (nn::save_checkpoint) and restore().
  nn::Checkpoint capture(int64_t step) const;

  // The three parts of step `step` (see the top). forward(batch) trains on a given batch instead of the
  // loader's next one (benchmarks cycle through a few held batches).
  const data::Batch& forward(int64_t step);
  const data::Batch& forward(int64_t step, data::Batch batch);
  std::vector<LossRow> read_losses();
  void backward_and_update();
  // All three, reading the losses as often as a run would (every step on the CPU, every log_every steps
  // on a GPU). Returns the batch trained on.
  const data::Batch& step(int64_t n);
  const data::Batch& step(int64_t n, data::Batch batch);

  // The rate forward()'s step trains with (backward_and_update() then moves the schedule on).
  double lr() const { return scheduler_->lr(); }
  // Whether the host reads the losses every step: free on the CPU, and anomaly mode must see each one.
  bool reads_every_step() const { return !device_.is_cuda() || detect_anomaly_; }

  models::FasterRCNN& model() { return *model_; }
  const RunConfig& config() const { return config_; }
  const Device& device() const { return device_; }
  dist::ProcessGroup& group() { return group_; }
  data::DataLoader& loader() { return *loader_; }
  Generator& generator() { return *generator_; }
  // Null on the CPU or with schedule.cuda_graphs off.
  CudaGraphs* cuda_graphs() { return graphs_.get(); }

 private:
  RunConfig config_;
  Device device_;
  dist::ProcessGroup& group_;
  bool detect_anomaly_;
  std::unique_ptr<Generator> generator_;
  std::unique_ptr<models::FasterRCNN> model_;
  std::unique_ptr<CudaGraphs> graphs_;
  std::unique_ptr<nn::Adam> optimizer_;
  std::unique_ptr<nn::WarmupCosineLR> scheduler_;
  std::unique_ptr<data::DataLoader> loader_;
  std::unique_ptr<dist::DistributedDataParallel> ddp_;  // made at the first update, after any restore()
  LossWatch watch_;
  void read_losses_if_due();

  data::Batch batch_;  // the step's batch
  Tensor total_;       // the step's total loss, for backward (and anomaly mode's second look)
  int64_t step_ = 0;
};

}  // namespace minidet::engine
