// What every benchmark program shares: the command line, the CPU and GPU timing loops, and the table and
// JSON-line output. A benchmark program only declares its workloads and the closures it times.
//
//   bench_<op> [--json PATH] [--cpu-reps N] [--gpu-reps N>=50] [--skip-cpu] [--skip-gpu]
//
// CPU: std::chrono::steady_clock, one warm-up run, then the median of --cpu-reps runs.
// GPU: CUDA events on minidet's current stream around each run, 10 warm-up runs, then the median of
//      --gpu-reps (>= 50) runs. Each run is timed on its own, so host-side work inside it (launch overhead,
//      a synchronisation the op makes) is counted, as the user would see it.
// Every measurement prints one JSON line (stdout, and PATH when given) that the PyTorch twin script
// (bench/<op>_torch.py --minidet-json PATH) reads to print the ratio. Timings are never asserted.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda/availability.h"
#if MINIDET_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#endif

namespace minidet::bench {

struct Args {
  int cpu_reps = 5;
  int gpu_reps = 100;
  bool skip_cpu = false;
  bool skip_gpu = false;
};

inline std::ofstream& json_file() {
  static std::ofstream file;
  return file;
}

// A program's own flags: given argv and the index of an argument the common flags do not know, returns
// true when it took that argument (advancing i past any value it read), false to reject it.
using ExtraFlags = std::function<bool(int argc, char** argv, int& i)>;

// ExtraFlags for flags that each take one value into a string, e.g. value_flags({{"--op", &only.op}}): the
// row filters of bench_roi_ops and bench_deform_conv2d.
inline ExtraFlags value_flags(std::vector<std::pair<std::string, std::string*>> flags) {
  return [flags = std::move(flags)](int argc, char** argv, int& i) {
    if (i + 1 >= argc) return false;
    for (const auto& [flag, value] : flags) {
      if (flag != argv[i]) continue;
      *value = argv[++i];
      return true;
    }
    return false;
  };
}

// Parses the common flags, and the program's own through `extra` (listed in the usage by `extra_usage`);
// prints the usage and exits on anything else.
inline Args parse_args(int argc, char** argv, int default_cpu_reps = 5, const ExtraFlags& extra = nullptr,
                       const char* extra_usage = "") {
  Args args;
  args.cpu_reps = default_cpu_reps;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_file().open(argv[++i]);
    else if (arg == "--cpu-reps" && i + 1 < argc) args.cpu_reps = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--gpu-reps" && i + 1 < argc) args.gpu_reps = std::max(50, std::atoi(argv[++i]));
    else if (arg == "--skip-cpu") args.skip_cpu = true;
    else if (arg == "--skip-gpu") args.skip_gpu = true;
    else if (!extra || !extra(argc, argv, i)) {
      std::fprintf(stderr, "usage: %s [--json PATH] [--cpu-reps N] [--gpu-reps N>=50] [--skip-cpu] [--skip-gpu]%s%s\n",
                   argv[0], *extra_usage ? " " : "", extra_usage);
      std::exit(2);
    }
  }
  return args;
}

// A row filter's value (--op, --pass, ...) must be empty (all rows) or one of `names`; else exits with a
// message listing them, so that a typo does not silently time nothing.
inline void require_choice(const char* program, const char* flag, const std::string& value,
                           const std::vector<std::string>& names) {
  if (value.empty() || std::find(names.begin(), names.end(), value) != names.end()) return;
  std::string list;
  for (const std::string& name : names) list += " '" + name + "'";
  std::fprintf(stderr, "%s: %s '%s' is none of%s\n", program, flag, value.c_str(), list.c_str());
  std::exit(2);
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

inline double time_cpu_ms(const std::function<void()>& fn, int reps) {
  fn();  // warm-up: first-touch allocations, Eigen's blocking buffers
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return median(ms);
}

// One measurement as a JSON line. `extra` holds further "key":value pairs, already formatted, or is empty.
inline void emit(const std::string& bench, const std::string& device, const std::string& shape,
                 const std::string& pass, double median_ms, const std::string& extra = "") {
  char s[768];
  std::snprintf(s, sizeof s,
                "{\"bench\":\"%s\",\"device\":\"%s\",\"shape\":\"%s\",\"pass\":\"%s\",\"median_ms\":%.4f%s%s}",
                bench.c_str(), device.c_str(), shape.c_str(), pass.c_str(), median_ms, extra.empty() ? "" : ",",
                extra.c_str());
  std::printf("%s\n", s);
  if (json_file().is_open()) json_file() << s << "\n";
}

// emit's `extra` for a rate of floating-point work.
inline std::string gflops_field(double gflops) {
  char s[48];
  std::snprintf(s, sizeof s, "\"gflops\":%.2f", gflops);
  return s;
}

#if MINIDET_WITH_CUDA
// "cuda:<GPU name>", the device string both this program and the twin script write.
inline std::string gpu_device_name() {
  cudaDeviceProp prop;
  MINIDET_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return std::string("cuda:") + prop.name;
}

// `fn` in a stream of `calls` back-to-back calls, as a training loop runs it: CUDA events around the
// whole stream, nothing waits in between, ms per call, median of `reps` streams. The host queues ahead while
// the GPU works, so this is the throughput, where time_gpu_ms (one call from an idle GPU) is the latency.
inline double time_gpu_stream_ms(const std::function<void()>& fn, int calls, int reps, int warmup = 10) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaStream_t stream = cuda::current_stream();
  cudaEvent_t start, stop;
  MINIDET_CUDA_CHECK(cudaEventCreate(&start));
  MINIDET_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    MINIDET_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int c = 0; c < calls; ++c) fn();
    MINIDET_CUDA_CHECK(cudaEventRecord(stop, stream));
    MINIDET_CUDA_CHECK(cudaEventSynchronize(stop));
    float elapsed = 0;
    MINIDET_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
    ms.push_back(elapsed / calls);
  }
  MINIDET_CUDA_CHECK(cudaEventDestroy(start));
  MINIDET_CUDA_CHECK(cudaEventDestroy(stop));
  return median(ms);
}

// One call of `fn` from an idle GPU: its latency, ms, median of `reps`.
inline double time_gpu_ms(const std::function<void()>& fn, int reps, int warmup = 10) {
  return time_gpu_stream_ms(fn, 1, reps, warmup);
}

// The host's share of `fn`: the wall time of the call alone, from an idle GPU (synchronised before each
// call, not inside it), median of `reps`. Launches return before their kernels run, so this is what the
// host spends queueing the work; a GPU time (time_gpu_ms) close to it means the host sets the pace.
inline double time_host_issue_ms(const std::function<void()>& fn, int reps, int warmup = 10) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    MINIDET_CUDA_CHECK(cudaDeviceSynchronize());
    const auto start = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  MINIDET_CUDA_CHECK(cudaDeviceSynchronize());
  return median(ms);
}
#else
// Never called without CUDA (run() below skips the GPU part), but lets benchmark code compile unchanged.
inline std::string gpu_device_name() { return "none"; }
inline double time_gpu_ms(const std::function<void()>&, int, int = 10) {
  std::fprintf(stderr, "time_gpu_ms: minidet was built without CUDA\n");
  std::abort();
}
inline double time_gpu_stream_ms(const std::function<void()>&, int, int, int = 10) {
  std::fprintf(stderr, "time_gpu_stream_ms: minidet was built without CUDA\n");
  std::abort();
}
inline double time_host_issue_ms(const std::function<void()>&, int, int = 10) {
  std::fprintf(stderr, "time_host_issue_ms: minidet was built without CUDA\n");
  std::abort();
}
#endif

// Runs the CPU part unless --skip-cpu, then the GPU part when there is a GPU (saying why when not).
// `run_gpu` receives the device name from gpu_device_name().
inline int run(const Args& args, const std::function<void()>& run_cpu,
               const std::function<void(const std::string&)>& run_gpu) {
  if (!args.skip_cpu) run_cpu();
  if (args.skip_gpu) return 0;
#if MINIDET_WITH_CUDA
  if (cuda::is_available()) {
    run_gpu(gpu_device_name());
    return 0;
  }
  std::printf("\n== GPU: SKIPPED (built with CUDA, but no GPU answers) ==\n");
#else
  (void)run_gpu;
  std::printf("\n== GPU: SKIPPED (built without CUDA) ==\n");
#endif
  return 0;
}

}  // namespace minidet::bench
