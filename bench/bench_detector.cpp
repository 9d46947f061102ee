// Detector benchmark: the tiny Faster R-CNN of `minidet train` (DetectorConfig's defaults, the synthetic
// shapes at 128 px, C = 3) end to end: one training step and one inference batch, float32, CPU and GPU,
// against torchvision's FasterRCNN built to the same sizes by the twin script bench/detector_torch.py.
//
//   bench_detector [--json PATH] [--cpu-reps N] [--gpu-reps N] [--skip-cpu] [--skip-gpu] [--batches 8,16]
//                  [--timeline DIR]
//   bench_detector --time-to-accuracy [--target 0.95] [--eval-every 50] [--steps N] [--json PATH]
//
// train  one step of the engine that `minidet train` runs (engine/trainer.h, Trainer::step): forward_train on
//        a loader's CPU batch (which moves the images and targets to the device), total_loss, the five loss
//        values recorded in the LossWatch (engine/loss_watch.h: on the GPU they reach the host in one copy
//        every log_every = 20 steps, on the CPU every step), zero_grad, backward, AdamW step, scheduler step.
//        The batches come from the trainer's own loader (seed, flips) and are drawn before timing: the loop
//        draws them on a background thread while the GPU trains, so their cost is not the step's.
// infer  forward_infer on one batch in eval mode (BatchNorm's running statistics), as the evaluation does,
//        with the backbone and the RPN head replayed as forward graphs (engine/cuda_graphs.h); infer-eager
//        the same with every op launched from the host.
//
// GPU: batch 8 and 16 (--batches), CUDA events around each step, the median after 10 warm-up steps (so the
// median step is one without the LossWatch's read). Beside it, per batch: the step with every op launched from
// the host (train-eager) and with the RoI box stage eager (train-2graphs); for all three, the host's share
// of a step (the wall time to queue it) and the time per step of 20 steps back to back, as the training loop
// runs them (the host queues ahead, so that is the throughput where one step from an idle GPU is the latency);
// and the GPU time of each graphed stage replayed alone. Then, separately (the counting would perturb the
// timing), over 20 more steps (one log_every window, so one read) and per step: kernel launches (CUPTI
// callbacks, bench/launch_counter.h; "n/a" without CUPTI), device-to-host and host-to-device copies
// (core/transfer_counts.h: each one is a host synchronisation, see there), cudaMalloc calls of the caching
// allocator (0 in a steady state) and the peak of allocated device memory over those steps (weights, AdamW's
// moments and the step's activations).
// CPU: batch 8 at 2 OpenMP threads (as `minidet train --threads 2`), steady clock, median of --cpu-reps.
//
// --timeline DIR also traces one graphed training step and one inference batch per batch size from an idle
// GPU with CUPTI's activity API (bench/step_timeline.h): it prints where the GPU waited for the host and
// writes every CUDA call of the step, with the GPU work it queued, to DIR/timeline_{train,infer}_bN.tsv.
//
// --time-to-accuracy trains from scratch with the engine's loop (engine/train_loop.h) and the default schedule
// (Schedule in engine/run_config.h: 750 steps of 8 images, AdamW 3e-3, warm-up + cosine), on the GPU when
// there is one, and evaluates VOC mAP@0.5 on the 200 held-out images every --eval-every steps. The training
// clock stops during evaluations (their time is reported apart). It prints the training time at which mAP@0.5
// first reaches --target, or the best mAP@0.5 and when it was reached if it never does. Timings are never
// asserted.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench/bench_common.h"
#include "bench/launch_counter.h"
#include "bench/step_timeline.h"
#include "core/allocator.h"
#include "core/grad_mode.h"
#include "core/transfer_counts.h"
#include "data/eval/voc_eval.h"
#include "engine/datasets.h"
#include "engine/evaluation.h"
#include "engine/train_loop.h"
#include "engine/trainer.h"
#if MINIDET_WITH_CUDA
#include "core/cuda/caching_allocator.h"
#endif

using namespace minidet;
using bench::emit;

namespace {

constexpr int kCpuThreads = 2;
constexpr int64_t kCpuBatch = 8;
constexpr int64_t kHeldBatches = 4;  // distinct batches cycled through by the timed steps
const int kCountedSteps = static_cast<int>(engine::Schedule{}.log_every);  // one LossWatch read per window
constexpr int kCountWarmupSteps = 5;  // before counting: see count_per_run

std::string shape_of(int64_t batch) {
  return "tiny:N=" + std::to_string(batch) + ",128px,C=" + std::to_string(models::DetectorConfig{}.num_classes);
}

// `minidet train`'s defaults with another batch size (and, for the eager twin, the graphs off).
engine::RunConfig run_config(int64_t batch, bool cuda_graphs = true) {
  engine::RunConfig config;
  config.schedule.batch = batch;
  config.schedule.cuda_graphs = cuda_graphs;
  return config;
}

// One measured configuration: the engine's trainer, as `minidet train` builds it, and the batches its steps
// cycle through (drawn from its own loader before timing: the loop's loader works on a background thread
// while the GPU trains, so drawing a batch is not the step's cost).
struct Workload {
  int64_t batch;
  engine::Trainer trainer;
  std::vector<data::Batch> batches;
  size_t next = 0;
  int64_t steps = 0;

  Workload(const Device& device, const data::Dataset& train, int64_t batch_size, bool cuda_graphs = true)
      : batch(batch_size), trainer(run_config(batch_size, cuda_graphs), train, device) {
    for (int64_t i = 0; i < kHeldBatches; ++i) batches.push_back(*trainer.loader().next());
  }
  const data::Batch& next_batch() { return batches[next++ % batches.size()]; }
  void train_step() { trainer.step(++steps, next_batch()); }
  void infer() {
    NoGradGuard no_grad;
    (void)trainer.model().forward_infer(next_batch());
  }
};

// Per-step counts over kCountedSteps runs of `fn` (GPU only); launches < 0 when not counted.
struct Counts {
  double launches = -1, device_to_host = 0, host_to_device = 0, host_waits = 0, device_allocations = 0;
  int64_t peak_bytes = 0;
  std::vector<std::pair<std::string, int64_t>> by_kernel;  // launches over all kCountedSteps runs
};

#if MINIDET_WITH_CUDA
Counts count_per_run(const std::function<void()>& fn) {
  // The counts run after every timing, so other workloads (the other batch size, the eager twin, inference)
  // have used the allocator's cache since this one last ran: a few steps first give it back its own steady
  // state, which is what the counts describe.
  for (int i = 0; i < kCountWarmupSteps; ++i) fn();
  MINIDET_CUDA_CHECK(cudaDeviceSynchronize());
  cuda::reset_peak_memory_stats(0);
  const cuda::MemoryStats memory_before = cuda::memory_stats(0);
  const TransferCounts transfers_before = transfer_counts();
  int64_t launches = -1;
  std::vector<std::pair<std::string, int64_t>> c_by_kernel;
  {
    bench::LaunchCounter counter;
    for (int i = 0; i < kCountedSteps; ++i) fn();
    MINIDET_CUDA_CHECK(cudaDeviceSynchronize());
    launches = counter.launches();
    c_by_kernel = counter.by_kernel();
  }
  const TransferCounts transfers = transfer_counts() - transfers_before;
  const cuda::MemoryStats memory = cuda::memory_stats(0);
  Counts c;
  if (launches >= 0) c.launches = static_cast<double>(launches) / kCountedSteps;
  c.device_to_host = static_cast<double>(transfers.device_to_host) / kCountedSteps;
  c.host_to_device = static_cast<double>(transfers.host_to_device) / kCountedSteps;
  c.host_waits = static_cast<double>(transfers.host_waits()) / kCountedSteps;
  c.device_allocations =
      static_cast<double>(memory.device_allocations - memory_before.device_allocations) / kCountedSteps;
  c.peak_bytes = memory.peak_allocated_bytes;
  c.by_kernel = std::move(c_by_kernel);
  return c;
}
#else
Counts count_per_run(const std::function<void()>&) { return {}; }
#endif

void print_header(bool counts) {
  std::printf("%-9s %-22s %-6s %10s", "bench", "shape", "pass", "median_ms");
  if (counts) std::printf(" %9s %6s %6s %8s %9s", "launches", "d2h", "h2d", "mallocs", "peak_MiB");
  std::printf("\n");
}

// One table row and its JSON line. On the GPU the JSON also holds the counts; "syncs" are the copies that
// made the host wait: every d2h, and the h2d too large for the pinned staging ring (core/transfer_counts.h).
void report(const std::string& device, int64_t batch, const char* pass, double ms, const Counts* counts) {
  std::printf("%-9s %-22s %-6s %10.3f", "detector", shape_of(batch).c_str(), pass, ms);
  if (!counts) {
    std::printf("\n");
    emit("detector", device, shape_of(batch), pass, ms);
    return;
  }
  const Counts& c = *counts;
  char launches[32] = "n/a";
  if (c.launches >= 0) std::snprintf(launches, sizeof launches, "%.1f", c.launches);
  std::printf(" %9s %6.1f %6.1f %8.1f %9.1f\n", launches, c.device_to_host, c.host_to_device, c.device_allocations,
              static_cast<double>(c.peak_bytes) / (1 << 20));
  std::ostringstream extra;
  extra << "\"launches\":" << (c.launches >= 0 ? launches : "null") << ",\"d2h\":" << c.device_to_host
        << ",\"h2d\":" << c.host_to_device << ",\"syncs\":" << c.host_waits
        << ",\"device_allocations\":" << c.device_allocations << ",\"peak_bytes\":" << c.peak_bytes;
  emit("detector", device, shape_of(batch), pass, ms, extra.str());
}

// Where the first batch size's training launches come from: the most launched kernels, per step.
void print_top_kernels(int64_t batch, const Counts& c) {
  if (c.by_kernel.empty()) return;
  std::printf("  most launched kernels of a training step at batch %lld (per step; of %.1f):\n",
              static_cast<long long>(batch), c.launches);
  for (size_t k = 0; k < c.by_kernel.size() && k < 25; ++k) {
    std::string name = c.by_kernel[k].first;
    if (name.size() > 110) name = name.substr(0, 107) + "...";
    std::printf("  %8.1f  %s\n", static_cast<double>(c.by_kernel[k].second) / kCountedSteps, name.c_str());
  }
}

void run_cpu(const data::Dataset& train, int reps) {
#ifdef _OPENMP
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(kCpuThreads);  // what `minidet train --threads 2` does (engine/checkpoints.cpp)
#endif
  std::printf("\n== CPU, %d threads, steady clock, median of %d runs after 1 warm-up ==\n", kCpuThreads, reps);
  print_header(false);
  Workload w(Device::cpu(), train, kCpuBatch);
  report("cpu", w.batch, "train", bench::time_cpu_ms([&] { w.train_step(); }, reps), nullptr);
  w.trainer.model().eval();
  report("cpu", w.batch, "infer", bench::time_cpu_ms([&] { w.infer(); }, reps), nullptr);
#ifdef _OPENMP
  omp_set_num_threads(threads_before);
#endif
}

// The host's share of a step in its two halves, untraced (CUPTI's tracing slows every CUDA call): forward
// (the batch's checks and upload, both stages and the losses) and backward with the update. Median of 20,
// each from an idle GPU.
void report_host_split(Workload& w) {
  std::vector<double> forward_ms, backward_ms;
  for (int r = 0; r < 20; ++r) {
    cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    w.trainer.forward(++w.steps, w.next_batch());
    const auto t1 = std::chrono::steady_clock::now();
    w.trainer.backward_and_update();
    const auto t2 = std::chrono::steady_clock::now();
    forward_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    backward_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    if (r % 10 == 9) (void)w.trainer.read_losses();  // as the loop does every log_every steps, untimed
  }
  std::printf("batch %lld: the host's share untraced: forward %.3f ms, backward and update %.3f ms (medians of 20)\n",
              static_cast<long long>(w.batch), bench::median(forward_ms), bench::median(backward_ms));
}

// Traces `fn` three times from an idle GPU, after three untraced calls (inference captures its graphs on its
// third), and reports the middle one (by when the GPU finished).
void report_timeline(const std::string& dir, const std::string& what, int64_t batch, const std::function<void()>& fn) {
  for (int r = 0; r < 3; ++r) fn();
  std::vector<bench::StepTimeline> runs;
  for (int r = 0; r < 3; ++r) runs.push_back(bench::record_timeline(fn));
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.gpu_end() < b.gpu_end(); });
  std::printf("batch %lld, %s, traced (GPU done at %.1f / %.1f / %.1f us in three runs; the middle one):\n",
              static_cast<long long>(batch), what.c_str(), runs[0].gpu_end(), runs[1].gpu_end(), runs[2].gpu_end());
  runs[1].print_summary(stdout, 5.0);
  const std::string path = dir + "/timeline_" + what + "_b" + std::to_string(batch) + ".tsv";
  if (!runs[1].write_rows(path)) std::printf("warning: could not write %s\n", path.c_str());
}

void run_gpu(const std::string& device, const data::Dataset& train, const std::vector<int64_t>& batch_sizes, int reps,
             const std::string& timeline_dir) {
  std::printf("\n== GPU %s, CUDA events, median of %d runs after 10 warm-up; counts per run over %d more ==\n",
              device.c_str(), reps, kCountedSteps);
  if (!bench::LaunchCounter::available()) std::printf("(built without CUPTI: kernel launches read n/a)\n");
  // All timings first, then all counts: CUPTI's callbacks slow every API call while subscribed.
  // "train" is the default step (the backbone, the RPN head and the RoI box stage replayed as CUDA graphs),
  // "train-eager" the same step with every op launched from the host (schedule.cuda_graphs = false): the
  // graphs' gain. "train-2graphs" keeps the box stage eager (its replacement removed), as the step was
  // before that stage had a graph: that graph's gain alone.
  std::vector<std::unique_ptr<Workload>> workloads, eager_workloads;
  std::vector<std::array<double, 6>> ms;
  for (int64_t batch : batch_sizes) {
    workloads.push_back(std::make_unique<Workload>(Device::cuda(), train, batch));
    Workload& w = *workloads.back();
    w.trainer.model().train();
    const double train_ms = bench::time_gpu_ms([&] { w.train_step(); }, reps);
    const double host_ms = bench::time_host_issue_ms([&] { w.train_step(); }, reps);
    const double stream_ms = bench::time_gpu_stream_ms([&] { w.train_step(); }, kCountedSteps, 5);
    if (!timeline_dir.empty()) {
      report_host_split(w);
      report_timeline(timeline_dir, "train", batch, [&] { w.train_step(); });
      w.trainer.model().eval();
      report_timeline(timeline_dir, "infer", batch, [&] { w.infer(); });
      w.trainer.model().train();
    }
    const nn::GraphedCounts graphs = w.trainer.cuda_graphs()->counts();
    // What the replays cost the GPU alone: the floor under the graphed stages' share of a step.
    double graph_gpu_ms = 0;
    std::string stages;
    for (const auto& [name, stage_ms] : w.trainer.cuda_graphs()->stage_replay_gpu_ms(50)) {
      graph_gpu_ms += stage_ms;
      char part[96];
      std::snprintf(part, sizeof part, "%s%s %.3f", stages.empty() ? "" : ", ", name.c_str(), stage_ms);
      stages += part;
    }
    eager_workloads.push_back(std::make_unique<Workload>(Device::cuda(), train, batch, /*cuda_graphs=*/false));
    Workload& e = *eager_workloads.back();
    e.trainer.model().train();
    const double eager_ms = bench::time_gpu_ms([&] { e.train_step(); }, reps);
    const double eager_host_ms = bench::time_host_issue_ms([&] { e.train_step(); }, reps);
    const double eager_stream_ms = bench::time_gpu_stream_ms([&] { e.train_step(); }, kCountedSteps, 5);
    double two_graphs_ms = 0, two_graphs_host_ms = 0, two_graphs_stream_ms = 0;
    {
      Workload t(Device::cuda(), train, batch);
      t.trainer.model().roi_heads->replace_forward(nullptr);
      t.trainer.model().train();
      two_graphs_ms = bench::time_gpu_ms([&] { t.train_step(); }, reps);
      two_graphs_host_ms = bench::time_host_issue_ms([&] { t.train_step(); }, reps);
      two_graphs_stream_ms = bench::time_gpu_stream_ms([&] { t.train_step(); }, kCountedSteps, 5);
      const nn::GraphedCounts two = t.trainer.cuda_graphs()->counts();
      if (two.captures != 2)  // the removed replacement must leave the backbone's and the head's graphs only
        std::printf("warning: train-2graphs captured %lld graphs, expected 2\n", static_cast<long long>(two.captures));
    }
    std::printf("batch %lld: graph calls (backbone, RPN head, box stage): %lld eager, %lld captured, %lld replayed\n",
                static_cast<long long>(batch), static_cast<long long>(graphs.eager),
                static_cast<long long>(graphs.captures), static_cast<long long>(graphs.replays));
    std::printf("batch %lld: GPU time of the graphed stages' forward and backward (replays back to back): %.3f ms "
                "(%s)\n", static_cast<long long>(batch), graph_gpu_ms, stages.c_str());
    std::printf("batch %lld, ms per step       %8s %8s %8s\n", static_cast<long long>(batch), "train", "2graphs",
                "eager");
    std::printf("  one step from an idle GPU  %8.3f %8.3f %8.3f\n", train_ms, two_graphs_ms, eager_ms);
    std::printf("  the host's share of it     %8.3f %8.3f %8.3f\n", host_ms, two_graphs_host_ms, eager_host_ms);
    std::printf("  %d steps back to back      %8.3f %8.3f %8.3f\n", kCountedSteps, stream_ms, two_graphs_stream_ms,
                eager_stream_ms);
    w.trainer.model().eval();
    e.trainer.model().eval();
    ms.push_back({train_ms, bench::time_gpu_ms([&] { w.infer(); }, reps), eager_ms, two_graphs_ms, stream_ms,
                  bench::time_gpu_ms([&] { e.infer(); }, reps)});
  }
  print_header(true);
  for (size_t i = 0; i < workloads.size(); ++i) {
    Workload& w = *workloads[i];
    w.trainer.model().train();
    const Counts train_counts = count_per_run([&] { w.train_step(); });
    report(device, w.batch, "train", ms[i][0], &train_counts);
    report(device, w.batch, "train-stream", ms[i][4], nullptr);  // 20 steps back to back, per step
    if (i == 0) print_top_kernels(w.batch, train_counts);
    Workload& e = *eager_workloads[i];
    const Counts eager_counts = count_per_run([&] { e.train_step(); });
    report(device, e.batch, "train-eager", ms[i][2], &eager_counts);
    report(device, e.batch, "train-2graphs", ms[i][3], nullptr);
    w.trainer.model().eval();
    const Counts infer_counts = count_per_run([&] { w.infer(); });
    report(device, w.batch, "infer", ms[i][1], &infer_counts);
    e.trainer.model().eval();
    const Counts infer_eager_counts = count_per_run([&] { e.infer(); });
    report(device, e.batch, "infer-eager", ms[i][5], &infer_eager_counts);
  }
}

// ---- time to accuracy ----------------------------------------------------------------------------------------

struct AccuracyOptions {
  double target = 0.95;
  int64_t eval_every = 50;
  int64_t steps = 0;  // 0: the schedule's
};

// VOC mAP@0.5 over `dataset`, with the very pass `minidet train` evaluates with (engine/evaluation.cpp).
double evaluate_map50(models::FasterRCNN& model, const data::Dataset& dataset, int64_t batch) {
  return data::evaluate_voc(data::ground_truth_from_dataset(dataset), engine::predict(model, dataset, batch))
      .mean_average_precision;
}

int time_to_accuracy(const bench::Args& args, const AccuracyOptions& o) {
  using Clock = std::chrono::steady_clock;
  const bool gpu = !args.skip_gpu && cuda::is_available();
  const Device device = gpu ? Device::cuda() : Device::cpu();
  const std::string device_name = gpu ? bench::gpu_device_name() : "cpu";
  engine::RunConfig config;
  if (o.steps > 0) config.schedule.steps = o.steps;
  config.schedule.eval_every = o.eval_every;
  const engine::Schedule& s = config.schedule;
  const engine::Datasets data = engine::open_datasets(config, true);
  engine::Trainer trainer(config, *data.train, device);
  std::printf("== time to accuracy on %s: %lld steps of %lld images, mAP@0.5 on %lld held-out images every %lld "
              "steps, target %.3f ==\n",
              device_name.c_str(), static_cast<long long>(s.steps), static_cast<long long>(s.batch),
              static_cast<long long>(data.val->size()), static_cast<long long>(o.eval_every), o.target);
  std::fflush(stdout);
  double train_seconds = 0, eval_seconds = 0, best = -1, best_seconds = 0;
  int64_t best_step = 0;
  auto segment_start = Clock::now();
  // The engine's loop, as `minidet train` runs it; the evaluation hook stops the training clock.
  engine::TrainHooks hooks;
  hooks.evaluate = [&](int64_t step) {
    if (gpu) cuda::synchronize();  // the step's last kernels belong to the training clock
    const auto eval_start = Clock::now();
    train_seconds += std::chrono::duration<double>(eval_start - segment_start).count();
    const double map50 = evaluate_map50(trainer.model(), *data.val, s.batch);
    segment_start = Clock::now();
    eval_seconds += std::chrono::duration<double>(segment_start - eval_start).count();
    std::printf("step %4lld  mAP@0.5 %.4f  training %.2f s  evaluation %.2f s\n", static_cast<long long>(step), map50,
                train_seconds, eval_seconds);
    std::fflush(stdout);
    if (map50 > best) {
      best = map50;
      best_seconds = train_seconds;
      best_step = step;
    }
  };
  hooks.stop_after = [&](int64_t, bool) { return best >= o.target; };  // the step after the one that reached it
  const int64_t steps_run = engine::train(trainer, 1, hooks).step;
  const bool reached = best >= o.target;
  if (reached)
    std::printf("reached mAP@0.5 %.4f >= %.3f at step %lld after %.2f s of training (%.2f s of evaluation)\n", best,
                o.target, static_cast<long long>(best_step), best_seconds, eval_seconds);
  else
    std::printf("never reached mAP@0.5 %.3f in %lld steps: best %.4f at step %lld after %.2f s of training\n",
                o.target, static_cast<long long>(steps_run), best, static_cast<long long>(best_step), best_seconds);
  std::ostringstream extra;
  extra << "\"target\":" << o.target << ",\"reached\":" << (reached ? "true" : "false") << ",\"map50\":" << best
        << ",\"step\":" << best_step << ",\"steps_run\":" << steps_run << ",\"train_seconds_total\":" << train_seconds
        << ",\"eval_seconds\":" << eval_seconds;
  emit("detector", device_name, "shapes:N=" + std::to_string(s.batch) + ",128px,C=3", "tta", 1000 * best_seconds,
       extra.str());
  return 0;
}

std::vector<int64_t> parse_batches(const std::string& text) {
  std::vector<int64_t> sizes;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const long long value = std::atoll(item.c_str());
    if (value < 1) {
      std::fprintf(stderr, "bench_detector: --batches wants positive sizes like 8,16, got '%s'\n", text.c_str());
      std::exit(2);
    }
    sizes.push_back(value);
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  minidet::retain_freed_host_memory();  // as the minidet program does (core/allocator.h)
  std::vector<int64_t> batch_sizes = {8, 16};
  bool accuracy_mode = false;
  AccuracyOptions accuracy;
  std::string timeline_dir;
  const bench::Args args = bench::parse_args(
      argc, argv, 3,
      [&](int count, char** values, int& i) {
        const std::string arg = values[i];
        const bool has_value = i + 1 < count;
        if (arg == "--batches" && has_value)
          batch_sizes = parse_batches(values[++i]);
        else if (arg == "--timeline" && has_value)
          timeline_dir = values[++i];
        else if (arg == "--time-to-accuracy")
          accuracy_mode = true;
        else if (arg == "--target" && has_value)
          accuracy.target = std::atof(values[++i]);
        else if (arg == "--eval-every" && has_value)
          accuracy.eval_every = std::max(1LL, std::atoll(values[++i]));
        else if (arg == "--steps" && has_value)
          accuracy.steps = std::max(1LL, std::atoll(values[++i]));
        else
          return false;
        return true;
      },
      "[--batches 8,16] [--timeline DIR] [--time-to-accuracy [--target 0.95] [--eval-every 50] [--steps N]]");
  if (accuracy_mode) return time_to_accuracy(args, accuracy);
  const engine::Datasets data = engine::open_datasets(engine::RunConfig{}, true);  // `minidet train`'s default data
  const data::Dataset& train = *data.train;
  return bench::run(
      args, [&] { run_cpu(train, args.cpu_reps); },
      [&](const std::string& device) { run_gpu(device, train, batch_sizes, args.gpu_reps, timeline_dir); });
}
