// `minidet train`: the engine's loop (engine/train_loop.h, over engine/trainer.h's step) with the hooks
// that make it a run that can be watched, interrupted and continued: the progress line and metrics.jsonl
// after each step, batches.jsonl (each step's images and flips, engine/batch_plan.h), and every eval_every
// steps and at the end the held-out evaluation, the plots, the detection pictures and the checkpoints.
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
// Data parallel (`mpirun -np N minidet train`, dist/): the Trainer splits every global batch over the ranks,
// so --resume works with any number of ranks (the checkpoint does not depend on it). The losses it reads are
// averaged over ranks, and a Ctrl-C on any rank is shared at the next step where the ranks meet
// (engine/stop_request.h), so every rank makes the same decisions (a non-finite loss, stopping).
// Evaluation is sharded too, and rank 0 gathers the detections and scores them. Only rank 0 prints, logs,
// plots and writes checkpoints; its banner lists where every rank runs (machine, local rank, GPU). BatchNorm
// uses each rank's own batch statistics (unless detector.backbone.norm is sync_batch_norm); rank 0's running
// statistics are copied to all after each step. Any error on one rank stops all of them
// (MPI_Abort) instead of leaving them waiting.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include "autograd/anomaly.h"
#include "core/cuda/availability.h"
#include "core/error.h"
#include "core/factories.h"
#include "engine/batch_plan.h"
#include "engine/evaluation.h"
#include "engine/metrics.h"
#include "engine/progress.h"
#include "engine/stop_request.h"
#include "engine/train_loop.h"
#include "examples/minidet/commands.h"
#include "examples/minidet/train_setup.h"

namespace minidet::cli {

namespace {

using Clock = std::chrono::steady_clock;

// One run: what prepare_training settled, the engine's trainer, and the best held-out mAP@0.5 so far.
struct Run {
  TrainSetup setup;
  Trainer trainer;
  double best_map50 = -1;

  const Schedule& schedule() const { return setup.config.schedule; }
  std::string path(const std::string& name) const { return setup.folder + "/" + name; }
  dist::ProcessGroup& group() { return trainer.group(); }

  // MINIDET_TEST_PAUSE_IN_CHECKPOINT_WRITE=ms is a test-only hook (test_minidet_crash.cpp): it sleeps
  // between writing "<name>.tmp" and renaming it, so a test can kill the run in the middle of a save.
  void save(const std::string& name, int64_t step) const {
    nn::Checkpoint checkpoint = trainer.capture(step);
    checkpoint.put(kConfigEntry, setup.config.to_tensor());
    checkpoint.put(kBestMapEntry, from_vector<double>({best_map50}));
    std::function<void()> pause;
    if (const char* ms = std::getenv("MINIDET_TEST_PAUSE_IN_CHECKPOINT_WRITE"))
      pause = [ms = std::atoi(ms)] { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
    nn::save_checkpoint(path(name), checkpoint, pause);
  }
};

// The checkpoint's state and data position (Trainer::restore). Returns the step to continue after.
int64_t restore(Run& run) {
  const RunCheckpoint& checkpoint = *run.setup.resume;
  run.best_map50 = checkpoint.best_map50;
  try {
    return run.trainer.restore(checkpoint.checkpoint);
  } catch (const Error& e) {
    MINIDET_FAIL("checkpoint '", checkpoint.path, "' cannot be resumed (", e.message(), ")");
  }
}

// The held-out evaluation: table, metrics line, plots, pictures, checkpoints.
// Rank 0 only gets past the gather (metrics is null on the others).
// train_seconds: this process's training time so far, evaluations left out (for time-to-accuracy).
void evaluate_and_save(Run& run, int64_t step, double train_seconds, MetricsLog* metrics, Progress& progress) {
  const auto start = Clock::now();
  const data::Dataset& val = *run.setup.data.val;
  dist::ProcessGroup& group = run.group();
  const std::vector<double> packed = group.gather_to_main(
      pack_detections(predict(run.trainer.model(), val, run.schedule().batch, group.size(), group.rank())),
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
              run.trainer.device().is_cuda() ? "the GPU" : "the CPU");
  std::printf("run folder   %s\n", f.c_str());
  std::printf("metrics      %s/metrics.jsonl  (config: %s/config.json)\n", f.c_str(), f.c_str());
  std::printf("plots        %s/loss.png  %s/map.png\n", f.c_str(), f.c_str());
  std::printf("detections   %s/detections/\n", f.c_str());
  std::printf("checkpoints  %s/last.ckpt  %s/best.ckpt (mAP@0.5 %.4f)\n", f.c_str(), f.c_str(), run.best_map50);
  std::printf("next         minidet eval --checkpoint %s    minidet detect --checkpoint %s IMAGES... --out DIR\n",
              f.c_str(), f.c_str());
  std::printf("             minidet explain --checkpoint %s --out step.html    (play one step's backward pass in a "
              "browser)\n", f.c_str());
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

// Where one rank runs: "rank 2: local 0 of 2 on gpu-b, cuda:0 (PCI 0000:1b:00.0)". The PCI bus id names the
// card itself, whatever numbering CUDA_VISIBLE_DEVICES gives it.
std::string placement(const dist::ProcessGroup& group, const Device& device) {
  std::string line = "rank " + std::to_string(group.rank()) + ": local " + std::to_string(group.local_rank()) +
                     " of " + std::to_string(group.local_size()) + " on " + group.host() + ", " + device.str();
  if (device.is_cuda()) line += " (PCI " + cuda::pci_bus_id(device.index) + ")";
  return line;
}

// Every rank calls it (rank 0 gathers the placements); only rank 0's stdout is open.
void print_banner(Run& run, int64_t first) {
  const Schedule& s = run.schedule();
  dist::ProcessGroup& group = run.group();
  const int ranks = group.size();
  if (ranks > 1) {
    const std::vector<std::string> places =
        group.gather_to_main(placement(group, run.trainer.device()), "gather of the ranks' placements");
    // A machine is a set of ranks that share memory (MPI_COMM_TYPE_SHARED): count their local rank 0s.
    const long machines = std::lround(
        group.all_reduce_sum({group.local_rank() == 0 ? 1.0 : 0.0}, "count of the machines")[0]);
    std::printf("data parallel: %d ranks on %ld machine%s, %lld images per rank per step\n", ranks, machines,
                machines == 1 ? "" : "s", static_cast<long long>(s.batch / ranks));
    for (const std::string& p : places) std::printf("  %s\n", p.c_str());
  }
  // BatchNorm's statistics over 1 or 2 small images are too noisy for this detector to learn well
  // (docs/distributed.md measures it, on one GPU and on several).
  const int64_t per_rank = s.batch / ranks;
  if (run.setup.config.detector.backbone.norm == models::NormKind::BatchNorm && per_rank <= 2)
    std::printf("note: BatchNorm normalises over the %lld image%s of each step%s alone, too few for steady "
                "statistics: %s\n",
                static_cast<long long>(per_rank), per_rank == 1 ? "" : "s", ranks > 1 ? " on each rank" : "",
                ranks > 1 ? "--set detector.backbone.norm=sync_batch_norm normalises over every rank's images"
                          : "train with 4 or more images per step");
  std::printf("minidet train: FasterRCNN with %lld parameters on %s; %lld training and %lld validation images; "
              "%s steps %lld..%lld of %lld images\n",
              static_cast<long long>(run.trainer.model().num_parameters()),
              run.trainer.device().is_cuda() ? "the GPU" : "the CPU",
              static_cast<long long>(run.setup.data.train->size()), static_cast<long long>(run.setup.data.val->size()),
              run.setup.resume ? "resuming," : "training", static_cast<long long>(first), static_cast<long long>(s.steps),
              static_cast<long long>(s.batch));
  std::printf("run folder %s\n", run.setup.folder.c_str());
  std::fflush(stdout);
}

// Stopping before the last step: last.ckpt and the command that continues. Returns the exit code.
int stop_early(Run& run, int64_t step, bool interrupted, Progress& progress) {
  if (run.group().is_main()) run.save("last.ckpt", step);
  progress.print(std::string(interrupted ? "interrupted" : "stopped (--stop-after)") + " after step " +
                 std::to_string(step) + "; saved " + run.path("last.ckpt") +
                 "\nresume with: minidet train --resume " + run.setup.folder);
  run.group().barrier("barrier after the last checkpoint");  // no rank exits before rank 0 has written it
  return interrupted ? 130 : 0;
}

// One rank: any --device, cuda:N included. Several: one GPU per rank, cuda:<local rank>.
Device training_device(const std::string& name, dist::ProcessGroup& group) {
  return group.size() > 1 ? group.pick_device(name) : pick_device(name);
}

int train(const TrainArgs& args, dist::ProcessGroup& group) {
  set_threads(args.threads, group.local_size());
  TrainSetup setup = prepare_training(args, group);
  const RunConfig config = setup.config;
  const data::Dataset& train_set = *setup.data.train;
  Run run{std::move(setup), Trainer(config, train_set, training_device(args.device, group), group, args.detect_anomaly)};
  const int64_t first = run.setup.resume ? restore(run) + 1 : 1;
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
  double elapsed = 0, eval_seconds = 0;  // evaluations' time, which the eval lines' train_s leave out

  TrainHooks hooks;
  hooks.stop_after = [&](int64_t step, bool ranks_meet) { return stop.stop_after(step, ranks_meet); };
  hooks.after_step = [&](const StepReport& r) {
    plan.record(r.step, run.trainer.loader().epoch(), r.batch);
    elapsed = log.add(r.step, r.losses, r.lr, r.batch.size() * group.size(), r.logged);
    // Before any checkpoint of this step is saved; several ranks meet only where they meet anyway.
    if (group.size() == 1 || r.ranks_meet) plan.flush();
  };
  hooks.evaluate = [&](int64_t step) {
    const auto start = Clock::now();
    evaluate_and_save(run, step, elapsed - eval_seconds, metrics ? &*metrics : nullptr, progress);
    eval_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  };
  const LoopEnd end = engine::train(run.trainer, first, hooks);
  if (end.stopped) return stop_early(run, end.step, stop.interrupted(), progress);
  if (main) print_summary(run, end.step, log.seconds());
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
