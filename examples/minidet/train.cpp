// `minidet train`: the training loop of examples/train_detector.cpp grown into a run that can be watched,
// interrupted and continued. Per step: the next batch (random flips), forward_train's four losses, recorded
// in a LossWatch (on the GPU they stay there until a logged step reads them all in one copy), backward,
// AdamW, the warm-up + cosine schedule. Every eval_every steps and at the end: the held-out evaluation, the plots,
// the detection pictures and the checkpoints. batches.jsonl records each step's images and flips (batch_plan.h).
//
// Exact resume: a checkpoint holds the weights, BatchNorm's statistics, AdamW's moments, the schedule's
// step, the samplers' generator and (step, epoch). The loader's order and flips are functions of
// (seed, epoch, index), so restarting epoch `epoch` and skipping the batches already trained on gives the
// very batches the uninterrupted run would have seen; on the CPU the losses match bit for bit.
//
// Crash safety (kill -9, power loss): checkpoints, config.json and the rewrite of metrics.jsonl on resume
// go to "<name>.tmp", renamed over <name> (core/file_write.h), so a checkpoint is always complete. A fresh
// run saves last.ckpt at step 0 before its first step, so from then on `--resume` always has a checkpoint
// to continue from; the resumed run drops the metrics lines after the checkpoint's step and trains those
// steps again, to the same bits. A run killed before that first save has no last.ckpt and is started again
// with its original command.
//
// Data parallel (`mpirun -np N minidet train`, dist/): schedule.batch is the global batch; each rank trains
// on its batch / N images of every global batch (the loader's shards) and DistributedDataParallel averages
// the gradients, so N ranks take the steps one process would take, in the same data order. That is why
// --resume works with any number of ranks: the checkpoint does not depend on it. Whenever the loss values
// are read (see LossWatch) they are averaged over ranks, and a Ctrl-C on any rank is shared by a host-only
// all-reduce of one flag per step, so every rank makes the same decisions (a non-finite loss, stopping).
// Evaluation is sharded too, and rank 0 gathers the detections and scores them. Only rank 0 prints, logs,
// plots and writes checkpoints. BatchNorm uses each rank's own batch statistics (no SyncBatchNorm); rank
// 0's running statistics are copied to all after each step. Any error on one rank stops all of them
// (MPI_Abort) instead of leaving them waiting.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "autograd/anomaly.h"
#include "core/error.h"
#include "core/factories.h"
#include "data/loader/loader.h"
#include "dist/ddp.h"
#include "engine/batch_plan.h"
#include "examples/minidet/commands.h"
#include "engine/evaluation.h"
#include "engine/loss_watch.h"
#include "engine/metrics.h"
#include "engine/progress.h"
#include "engine/stop_request.h"
#include "examples/minidet/train_setup.h"
#include "nn/optim/adam.h"
#include "nn/optim/lr_scheduler.h"
#include "ops/shape/cat.h"

namespace minidet::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Everything one training run holds between steps.
struct Run {
  dist::ProcessGroup& group;
  TrainSetup setup;
  Device device = Device::cpu();
  std::unique_ptr<Generator> generator;
  std::unique_ptr<models::FasterRCNN> model;
  std::unique_ptr<nn::Adam> optimizer;
  std::unique_ptr<nn::WarmupCosineLR> scheduler;
  std::unique_ptr<data::DataLoader> loader;
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  double best_map50 = -1;

  const Schedule& schedule() const { return setup.config.schedule; }
  std::string path(const std::string& name) const { return setup.folder + "/" + name; }

  // MINIDET_TEST_PAUSE_IN_CHECKPOINT_WRITE=ms is a test-only hook (test_minidet_crash.cpp): it sleeps
  // between writing "<name>.tmp" and renaming it, so a test can kill the run in the middle of a save.
  void save(const std::string& name, int64_t step) const {
    nn::Checkpoint checkpoint =
        nn::capture_training_state(*model, optimizer.get(), scheduler.get(), generator.get(), {step, loader->epoch()});
    checkpoint.put(kConfigEntry, setup.config.to_tensor());
    checkpoint.put(kBestMapEntry, from_vector<double>({best_map50}));
    std::function<void()> pause;
    if (const char* ms = std::getenv("MINIDET_TEST_PAUSE_IN_CHECKPOINT_WRITE"))
      pause = [ms = std::atoi(ms)] { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
    nn::save_checkpoint(path(name), checkpoint, pause);
  }
};

void build(Run& run, const TrainArgs& args) {
  const Schedule& s = run.schedule();
  dist::ProcessGroup& group = run.group;
  // One rank: any --device, cuda:N included. Several: one GPU per rank, cuda:<local rank>.
  run.device = group.size() > 1 ? group.pick_device(args.device) : pick_device(args.device);
  MINIDET_CHECK(s.batch % group.size() == 0, "schedule.batch ", s.batch, " is the global batch: it must be a multiple ",
                "of the ", group.size(), " ranks");
  run.generator = std::make_unique<Generator>(s.seed);
  run.model = std::make_unique<models::FasterRCNN>(run.setup.config.detector, run.generator.get());
  run.model->use_cuda_graphs(s.cuda_graphs);
  run.model->to(run.device);
  run.optimizer = std::make_unique<nn::Adam>(std::vector<nn::ParamGroup>{{run.model->parameters(), s.lr, s.weight_decay}},
                                             nn::AdamOptions{0.9, 0.999, 1e-8, true});
  run.scheduler = std::make_unique<nn::WarmupCosineLR>(*run.optimizer, s.steps, s.min_lr_factor,
                                                       std::min(s.warmup, s.steps / 5));
  data::LoaderOptions loader_options;
  loader_options.batch_size = s.batch / group.size();
  loader_options.num_shards = group.size();
  loader_options.shard_index = group.rank();
  loader_options.seed = s.seed;
  loader_options.drop_last = true;
  loader_options.transform = data::random_horizontal_flip(s.flip_probability);
  run.loader = std::make_unique<data::DataLoader>(*run.setup.data.train, loader_options);
  MINIDET_CHECK(run.loader->batches_per_epoch() >= 1, "the training data has ", run.setup.data.train->size(),
                " images, fewer than one batch of ", s.batch);
}

// Restores the checkpoint and replays the data order up to its step. Returns the step to continue after.
int64_t restore(Run& run) {
  const RunCheckpoint& checkpoint = *run.setup.resume;
  nn::TrainingProgress progress;
  try {
    progress = nn::restore_training_state(checkpoint.checkpoint, *run.model, run.optimizer.get(),
                                          run.scheduler.get(), run.generator.get());
  } catch (const Error& e) {
    MINIDET_FAIL("checkpoint '", checkpoint.path, "' cannot be resumed (", e.message(), ")");
  }
  run.best_map50 = checkpoint.best_map50;
  run.loader->start_epoch(progress.epoch);
  // Batches are drawn lazily (a new epoch starts when the previous one runs dry), so after `step` steps the
  // loader is in `epoch` with step - epoch * batches_per_epoch of its batches consumed.
  const int64_t consumed = progress.step - progress.epoch * run.loader->batches_per_epoch();
  MINIDET_CHECK(consumed >= 0 && consumed <= run.loader->batches_per_epoch(), "checkpoint '", checkpoint.path,
                "': step ", progress.step, " and epoch ", progress.epoch, " do not fit ",
                run.loader->batches_per_epoch(), " batches per epoch");
  for (int64_t i = 0; i < consumed; ++i) run.loader->next();
  return progress.step;
}

data::Batch next_batch(data::DataLoader& loader) {
  std::optional<data::Batch> batch = loader.next();
  if (!batch) {
    loader.start_epoch(loader.epoch() + 1);
    batch = loader.next();
  }
  return std::move(*batch);
}

// The error for a non-finite loss: the step, the parts that are not finite and, in anomaly mode, the op
// whose backward produced the first NaN (found by running backward once more under the anomaly checks).
[[noreturn]] void fail_non_finite(int64_t step, const std::vector<double>& values, const Tensor& total,
                                  bool detect_anomaly) {
  std::string parts;
  for (size_t i = 0; i < kLossNames.size(); ++i)
    if (!std::isfinite(values[i + 1]))
      parts += std::string(parts.empty() ? "" : ", ") + kLossNames[i] + " = " +
               (std::isnan(values[i + 1]) ? "nan" : values[i + 1] > 0 ? "inf" : "-inf");
  std::string op = " (run with --detect-anomaly to find the op)";
  if (detect_anomaly) {
    op = " (anomaly mode found no NaN in backward)";
    try {
      total.backward();
    } catch (const Error& e) {
      op = "; " + e.message();
    }
  }
  MINIDET_FAIL("step ", step, ": the loss is not finite (", parts.empty() ? "the total" : parts, ")", op);
}

// The ranks' mean losses, so that every rank sees the same values and takes the same decisions.
std::vector<LossRow> mean_over_ranks(std::vector<LossRow> rows, dist::ProcessGroup& group) {
  if (group.size() == 1) return rows;
  std::vector<double> flat;
  for (const LossRow& row : rows) flat.insert(flat.end(), row.values.begin(), row.values.end());
  flat = group.all_reduce_sum(flat, "all-reduce of the loss values");
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t i = 0; i < rows[r].values.size(); ++i) rows[r].values[i] = flat[r * rows[r].values.size() + i] / group.size();
  return rows;
}

// The held-out evaluation: table, metrics line, plots, pictures, checkpoints.
// Rank 0 only gets past the gather (metrics is null on the others).
// train_seconds: this process's training time so far, evaluations left out (for time-to-accuracy).
void evaluate_and_save(Run& run, int64_t step, double train_seconds, MetricsLog* metrics, Progress& progress) {
  const auto start = Clock::now();
  const data::Dataset& val = *run.setup.data.val;
  dist::ProcessGroup& group = run.group;
  const std::vector<double> packed = group.gather_to_main(
      pack_detections(predict(*run.model, val, run.schedule().batch, group.size(), group.rank())),
      "gather of the evaluation's detections");
  if (!group.is_main()) return;
  std::vector<data::Detection> detections = unpack_detections(packed);
  // Back to the dataset's order (ranks hold interleaved parts of each batch), as one process would list them.
  std::stable_sort(detections.begin(), detections.end(),
                   [](const data::Detection& a, const data::Detection& b) { return a.image_id < b.image_id; });
  const Scores scores = score(val, detections);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  char header[160];
  std::snprintf(header, sizeof header, "evaluation at step %lld on %lld held-out images (%.1f s): mAP@0.5 %.4f  COCO AP %.4f",
                static_cast<long long>(step), static_cast<long long>(val.size()), seconds, scores.map50,
                scores.coco[0]);
  progress.print(std::string(header) + "\n" + scores.table);
  metrics->add_eval(step, scores, train_seconds);
  metrics->draw_plots(run.setup.folder);
  draw_examples(val, detections, run.schedule().detection_images, run.path("detections"));
  // The first evaluation always writes best.ckpt, even when the mAP is -1 (a split without objects).
  if (scores.map50 > run.best_map50 || !std::filesystem::exists(run.path("best.ckpt"))) {
    run.best_map50 = scores.map50;
    run.save("best.ckpt", step);
  }
  run.save("last.ckpt", step);
}

void print_summary(const Run& run, int64_t step, double seconds) {
  const std::string& f = run.setup.folder;
  std::printf("\ntrained %lld steps in %s on %s\n", static_cast<long long>(step), format_duration(seconds).c_str(),
              run.device.is_cuda() ? "the GPU" : "the CPU");
  std::printf("run folder   %s\n", f.c_str());
  std::printf("metrics      %s/metrics.jsonl  (config: %s/config.json)\n", f.c_str(), f.c_str());
  std::printf("plots        %s/loss.png  %s/map.png\n", f.c_str(), f.c_str());
  std::printf("detections   %s/detections/\n", f.c_str());
  std::printf("checkpoints  %s/last.ckpt  %s/best.ckpt (mAP@0.5 %.4f)\n", f.c_str(), f.c_str(), run.best_map50);
  std::printf("next         minidet eval --checkpoint %s    minidet detect --checkpoint %s IMAGES... --out DIR\n",
              f.c_str(), f.c_str());
}


// The losses of the steps the watch holds, averaged over the ranks, now that the host reads them: the
// values for the progress line, or the run's end at the first that is not finite.
void read_losses(LossWatch& watch, Run& run, int64_t step, const Tensor& total, bool detect_anomaly,
                 std::array<double, 5>& shown) {
  for (const LossRow& row : mean_over_ranks(watch.take(), run.group)) {
    const std::vector<double> values(row.values.begin(), row.values.end());
    if (!std::isfinite(values[0])) {
      auto local = run.ddp->no_sync();  // anomaly mode's extra backward must not start any all-reduce
      fail_non_finite(row.step, values, total, detect_anomaly && row.step == step);
    }
    shown = row.values;
  }
}

// The progress line and metrics.jsonl: a TrainRecord per step, with the images per second of the whole job
// since the last logged step and the time left at the run's mean speed so far.
class StepLog {
 public:
  StepLog(const Schedule& schedule, int64_t first, MetricsLog* metrics, Progress& progress)
      : schedule_(schedule), first_(first), metrics_(metrics), progress_(progress) {}

  // Returns the seconds since the loop started.
  double add(int64_t step, const std::array<double, 5>& shown, double lr, int64_t images, bool logged) {
    window_images_ += images;
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    TrainRecord record{step, shown[0], {shown[1], shown[2], shown[3], shown[4]}, lr,
                       window_images_ / std::max(1e-9, std::chrono::duration<double>(now - window_start_).count()),
                       elapsed, (schedule_.steps - step) * elapsed / (step - first_ + 1)};
    progress_.step(record, logged);
    if (logged) {
      if (metrics_) metrics_->add_train(record);
      window_start_ = now;
      window_images_ = 0;
    }
    return elapsed;
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  const Schedule& schedule_;
  int64_t first_;
  MetricsLog* metrics_;
  Progress& progress_;
  Clock::time_point start_ = Clock::now(), window_start_ = start_;
  int64_t window_images_ = 0;
};

void print_banner(const Run& run, int64_t first) {
  const Schedule& s = run.schedule();
  if (run.group.size() > 1)
    std::printf("data parallel: %d ranks, %lld images per rank per step\n", run.group.size(),
                static_cast<long long>(s.batch / run.group.size()));
  std::printf("minidet train: FasterRCNN with %lld parameters on %s; %lld training and %lld validation images; "
              "%s steps %lld..%lld of %lld images\n",
              static_cast<long long>(run.model->num_parameters()), run.device.is_cuda() ? "the GPU" : "the CPU",
              static_cast<long long>(run.setup.data.train->size()), static_cast<long long>(run.setup.data.val->size()),
              run.setup.resume ? "resuming," : "training", static_cast<long long>(first), static_cast<long long>(s.steps),
              static_cast<long long>(s.batch));
  std::printf("run folder %s\n", run.setup.folder.c_str());
  std::fflush(stdout);
}

// Stopping before the last step: last.ckpt and the command that continues. Returns the exit code.
int stop_early(const Run& run, int64_t step, bool interrupted, Progress& progress) {
  if (run.group.is_main()) run.save("last.ckpt", step);
  progress.print(std::string(interrupted ? "interrupted" : "stopped (--stop-after)") + " after step " +
                 std::to_string(step) + "; saved " + run.path("last.ckpt") +
                 "\nresume with: minidet train --resume " + run.setup.folder);
  run.group.barrier("barrier after the last checkpoint");  // no rank exits before rank 0 has written it
  return interrupted ? 130 : 0;
}

int train(const TrainArgs& args, dist::ProcessGroup& group) {
  set_threads(args.threads, group.local_size());
  Run run{group, prepare_training(args, group)};
  build(run, args);
  const int64_t first = run.setup.resume ? restore(run) + 1 : 1;
  // After restore: every rank read the checkpoint, and DDP's broadcast from rank 0 makes sure they agree.
  run.ddp = std::make_unique<dist::DistributedDataParallel>(*run.model, group);
  const Schedule& s = run.schedule();
  const bool main = group.is_main();
  std::optional<MetricsLog> metrics;  // only rank 0 writes metrics.jsonl
  if (main) metrics.emplace(run.path("metrics.jsonl"), first - 1);
  BatchPlan plan(run.path("batches.jsonl"), first - 1, group);  // every rank: rank 0 writes the global batches
  if (main && !run.setup.resume) run.save("last.ckpt", 0);  // from here on, --resume always works (see the top)
  // Only rank 0 prints: N progress lines would be noise (errors still reach stderr).
  if (!main && std::freopen("/dev/null", "w", stdout) == nullptr) MINIDET_FAIL("cannot silence stdout");
  print_banner(run, first);

  std::optional<autograd::DetectAnomalyGuard> anomaly;
  if (args.detect_anomaly) anomaly.emplace();
  StopRequest stop(group, args.stop_after);
  Progress progress(s.steps, s.log_every, /*allow_live=*/group.size() == 1);  // see Progress: mpirun's pty
  StepLog log(s, first, metrics ? &*metrics : nullptr, progress);
  double eval_seconds = 0;  // spent in evaluations, which the eval lines' train_s leave out
  // The host reads the losses at every step where it needs them (see loss_watch.h); on the CPU and in
  // anomaly mode that is every step, so a non-finite loss stops the run before its optimizer step.
  LossWatch watch(s.log_every + 1, run.device);
  const bool look_every_step = !run.device.is_cuda() || args.detect_anomaly;
  std::array<double, 5> shown{};  // the last values read, for the progress line between logged steps
  int64_t step = first - 1;
  while (step < s.steps) {
    ++step;
    // Forward: the batch, the four losses and their total, kept on the device in the watch.
    const data::Batch batch = next_batch(*run.loader);
    plan.record(step, run.loader->epoch(), batch);
    const models::Losses losses = run.model->forward_train(batch, run.generator.get());
    const Tensor total = models::FasterRCNN::total_loss(losses);
    std::vector<Tensor> parts{total};
    for (const char* name : kLossNames) parts.push_back(losses.at(name).detach());
    watch.record(step, stack(parts).detach());

    // What this step does besides training; the ranks agree on all of it.
    const bool logged = step % s.log_every == 0 || step == s.steps || step == 1;
    const bool evaluating = step == s.steps || (s.eval_every > 0 && step % s.eval_every == 0);
    const bool stopping = stop.stop_after(step, logged || evaluating);
    if (look_every_step || logged || evaluating || stopping)
      read_losses(watch, run, step, total, args.detect_anomaly, shown);

    // Backward and the update.
    const double lr = run.scheduler->lr();  // the rate this step uses; step() below sets the next one
    run.optimizer->zero_grad();
    run.ddp->backward(total);  // backward, with the gradients averaged over ranks as they become ready
    run.optimizer->step();
    run.scheduler->step();

    // Logging, the batch plan, evaluation and checkpoints.
    const double elapsed = log.add(step, shown, lr, batch.size() * group.size(), logged);
    // Before any checkpoint of this step is saved; several ranks meet only where they meet anyway.
    if (group.size() == 1 || logged || evaluating || stopping) plan.flush();
    if (evaluating) {
      const auto eval_start = Clock::now();
      evaluate_and_save(run, step, elapsed - eval_seconds, metrics ? &*metrics : nullptr, progress);
      eval_seconds += std::chrono::duration<double>(Clock::now() - eval_start).count();
    }
    if (stopping && step < s.steps) return stop_early(run, step, stop.interrupted(), progress);
  }
  if (main) print_summary(run, step, log.seconds());
  group.barrier("barrier at the end of training");
  return 0;
}

}  // namespace

int run_train(const TrainArgs& args) {
  dist::ProcessGroup& group = dist::ProcessGroup::world();
  group.set_timeout(args.dist_timeout);
  if (group.size() == 1) return train(args, group);
  try {
    return train(args, group);
  } catch (const Error& e) {
    // The other ranks would wait for this one in their next collective: stop them all now, with the reason.
    group.abort(e.message());
  } catch (const std::exception& e) {
    group.abort(e.what());
  }
}

}  // namespace minidet::cli
