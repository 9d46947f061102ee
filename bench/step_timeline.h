// One call of a stretch of code as both the host and the GPU saw it, from CUPTI's activity API: when the host
// made each CUDA call, and when the GPU ran the kernels, copies and fills it queued. It answers the question
// a step timed from an idle GPU raises when it takes longer than both the host's share and the GPU's work:
// where does the GPU wait for the host, and what was the host queueing then? (Nsight Systems draws the
// same picture; the GPU machines here cannot make its reports.)
//
//   StepTimeline timeline = record_timeline([&] { trainer.step(n, batch); });   // from an idle GPU
//   timeline.print_summary(stdout, 10.0);   // the GPU's idle gaps of 10 us or more, and who ended each
//   timeline.write_rows("timeline.tsv");     // one row per CUDA call: host time, its GPU work, kernel name
//
// Every time is in microseconds from the moment record_timeline called `fn`. A kernel replayed from a CUDA
// graph carries the correlation id of its cudaGraphLaunch, so a graph's kernels count as that one call's
// work. Built only with CUPTI (MINIDET_BENCH_CUPTI=1, as bench/launch_counter.h); tracing adds a little
// host time to every CUDA call, so the span it shows is an upper bound of the untraced one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/launch_counter.h"

#if MINIDET_BENCH_CUPTI
#include <cuda_runtime.h>
#include <cupti.h>
#endif

namespace minidet::bench {

// One CUDA call of the host and the GPU work it queued (none for calls such as cudaEventRecord).
struct TimelineCall {
  double host_start = 0, host_end = 0;  // us from the start of the recording
  std::string api;                      // cudaLaunchKernel, cudaGraphLaunch, cuLaunchKernel, ...
  int gpu_items = 0;                    // kernels, copies and fills it queued
  double gpu_start = -1, gpu_end = -1;  // of the first to start and the last to end
  std::string first_item;               // the first kernel's (demangled, shortened) name, or "memcpy"/"memset"
};

struct StepTimeline {
  std::vector<TimelineCall> calls;  // in host order
  double host_end = 0;              // the host's return from `fn`
  std::string error;                // non-empty when nothing could be recorded

  double gpu_end() const {
    double end = 0;
    for (const TimelineCall& c : calls) end = std::max(end, c.gpu_end);
    return end;
  }

  // The union of the GPU's busy intervals, us.
  double gpu_busy() const {
    std::vector<std::pair<double, double>> spans;
    for (const TimelineCall& c : calls)
      if (c.gpu_items > 0) spans.emplace_back(c.gpu_start, c.gpu_end);
    std::sort(spans.begin(), spans.end());
    double busy = 0, open = -1, close = -1;
    for (const auto& [s, e] : spans) {
      if (s > close) {
        busy += close - open;
        open = s;
        close = e;
      } else {
        close = std::max(close, e);
      }
    }
    return busy + (close - open);
  }

  // The span, the GPU's busy time, and each gap of at least `min_gap_us` in which the GPU had nothing to
  // run, with the call that ended it: "host" when that call was made after the gap began (the GPU waited
  // for the host to queue it), and the host's time between the call before the gap and this one.
  void print_summary(std::FILE* out, double min_gap_us) const {
    if (!error.empty()) {
      std::fprintf(out, "timeline: %s\n", error.c_str());
      return;
    }
    const double end = gpu_end();
    std::fprintf(out, "timeline: host returns at %.1f us, GPU done at %.1f us, GPU busy %.1f us (%zu CUDA calls)\n",
                 host_end, end, gpu_busy(), calls.size());
    std::vector<const TimelineCall*> work;
    for (const TimelineCall& c : calls)
      if (c.gpu_items > 0) work.push_back(&c);
    std::sort(work.begin(), work.end(), [](auto* a, auto* b) { return a->gpu_start < b->gpu_start; });
    std::fprintf(out, "  GPU idle gaps of %.0f us or more: from, to (us), who ended it, its host call at (us)\n",
                 min_gap_us);
    double covered = 0, idle_total = 0;
    for (const TimelineCall* c : work) {
      if (c->gpu_start - covered >= min_gap_us) {
        idle_total += c->gpu_start - covered;
        const bool host_bound = c->host_start > covered;
        std::fprintf(out, "  %9.1f %9.1f  %-5s %9.1f  %s %s\n", covered, c->gpu_start, host_bound ? "host" : "gpu",
                     c->host_start, c->api.c_str(), c->first_item.c_str());
      }
      covered = std::max(covered, c->gpu_end);
    }
    std::fprintf(out, "  idle in those gaps: %.1f us\n", idle_total);
  }

  // One tab-separated row per call: host start, host end, GPU start, GPU end, items, API, first item.
  bool write_rows(const std::string& path) const {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return false;
    std::fprintf(f, "host_start_us\thost_end_us\tgpu_start_us\tgpu_end_us\titems\tapi\tfirst_item\n");
    for (const TimelineCall& c : calls)
      std::fprintf(f, "%.2f\t%.2f\t%.2f\t%.2f\t%d\t%s\t%s\n", c.host_start, c.host_end, c.gpu_start, c.gpu_end,
                   c.gpu_items, c.api.c_str(), c.first_item.c_str());
    return std::fclose(f) == 0;
  }
};

#if MINIDET_BENCH_CUPTI

namespace timeline_detail {

struct ApiRecord {
  uint64_t start, end;
  uint32_t correlation;
  std::string name;
};
struct GpuRecord {
  uint64_t start, end;
  uint32_t correlation;
  std::string name;
};

struct Store {
  std::vector<ApiRecord> api;
  std::vector<GpuRecord> gpu;
};
inline Store& store() {
  static Store s;
  return s;
}

inline std::string short_name(const char* symbol) {
  if (!symbol) return "(unnamed)";
  const std::string text = demangle(symbol);
  return text.size() > 100 ? text.substr(0, 97) + "..." : text;
}

inline void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = 8 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = kBytes;
  *max_records = 0;
}

inline void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  Store& s = store();
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        const char* name = nullptr;
        cuptiGetCallbackName(
            record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
            a->cbid, &name);
        s.api.push_back({a->start, a->end, a->correlationId, name ? name : "?"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        s.gpu.push_back({k->start, k->end, k->correlationId, short_name(k->name)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        s.gpu.push_back({m->start, m->end, m->correlationId, "memcpy"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        s.gpu.push_back({m->start, m->end, m->correlationId, "memset"});
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
}

inline bool ok(CUptiResult result, const char* what, std::string& error) {
  if (result == CUPTI_SUCCESS) return true;
  const char* message = "unknown error";
  cuptiGetResultString(result, &message);
  error = std::string(what) + " failed: " + message;
  return false;
}

}  // namespace timeline_detail

// Runs `fn` once from an idle GPU under CUPTI's activity tracing. No other CUPTI client (LaunchCounter)
// may be alive meanwhile.
inline StepTimeline record_timeline(const std::function<void()>& fn) {
  namespace d = timeline_detail;
  StepTimeline t;
  d::store() = {};
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
                                      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_MEMSET};
  if (!d::ok(cuptiActivityRegisterCallbacks(d::buffer_requested, d::buffer_completed), "cuptiActivityRegisterCallbacks",
             t.error))
    return t;
  for (CUpti_ActivityKind kind : kinds)
    if (!d::ok(cuptiActivityEnable(kind), "cuptiActivityEnable", t.error)) return t;
  cudaDeviceSynchronize();
  uint64_t t0 = 0, t1 = 0;
  cuptiGetTimestamp(&t0);
  fn();
  cuptiGetTimestamp(&t1);
  cudaDeviceSynchronize();
  cuptiActivityFlushAll(1);
  for (CUpti_ActivityKind kind : kinds) cuptiActivityDisable(kind);
  d::Store s = std::move(d::store());
  d::store() = {};

  const auto us = [t0](uint64_t ns) { return (static_cast<double>(ns) - static_cast<double>(t0)) / 1000.0; };
  t.host_end = us(t1);
  // A runtime call and the driver calls it makes may share one correlation id: the row is the outer call,
  // the first to start.
  std::sort(s.api.begin(), s.api.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  std::map<uint32_t, size_t> by_correlation;
  for (const d::ApiRecord& a : s.api) {
    if (a.start < t0 || a.start > t1 || by_correlation.count(a.correlation)) continue;
    TimelineCall c;
    c.host_start = us(a.start);
    c.host_end = us(a.end);
    c.api = a.name;
    by_correlation[a.correlation] = t.calls.size();
    t.calls.push_back(c);
  }
  std::sort(s.gpu.begin(), s.gpu.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  for (const d::GpuRecord& g : s.gpu) {
    const auto it = by_correlation.find(g.correlation);
    if (it == by_correlation.end()) continue;
    TimelineCall& c = t.calls[it->second];
    if (c.gpu_items++ == 0) {
      c.gpu_start = us(g.start);
      c.first_item = g.name;
    }
    c.gpu_start = std::min(c.gpu_start, us(g.start));
    c.gpu_end = std::max(c.gpu_end, us(g.end));
  }
  return t;
}

#else

inline StepTimeline record_timeline(const std::function<void()>& fn) {
  StepTimeline t;
  fn();
  t.error = "built without CUPTI";
  return t;
}

#endif

}  // namespace minidet::bench
