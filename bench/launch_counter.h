// Counting the CUDA kernel launches of a stretch of code with CUPTI's callback API, for the benchmarks that
// report launches per step (bench_detector). Built only when CMake found CUPTI (MINIDET_BENCH_CUPTI=1);
// without it LaunchCounter::available() is false and the programs print "n/a".
//
//   LaunchCounter counter;            // subscribes: from here on every launch API call is seen
//   ... one training step ...
//   int64_t launches = counter.launches();
//   auto top = counter.by_kernel();   // (demangled kernel name, launches), most launched first
//
// Why both API domains: minidet's own kernels go through the runtime (cudaLaunchKernel, from <<<...>>>),
// but cuBLAS and CUB may launch through the driver (cuLaunchKernel*). The runtime's own launch may in turn
// call the driver's, so a driver launch made while a runtime launch of the same thread is in progress is
// the same kernel and is not counted twice. Calls are matched by name prefix (cudaLaunchKernel,
// cudaLaunchKernelExC, their _ptsz forms, cooperative launches...), which holds across CUPTI versions where
// the callback ids do not. Only one CUPTI subscriber may exist at a time.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cxxabi.h>

#if MINIDET_BENCH_CUPTI
#include <cupti.h>
#endif

namespace minidet::bench {

// A kernel's mangled symbol as C++ reads it (the symbol itself when it does not demangle). Template
// arguments are kept, since they tell the elementwise functors apart.
inline std::string demangle(const std::string& symbol) {
  int status = 0;
  char* name = abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status);
  std::string text = status == 0 && name ? name : symbol;
  std::free(name);
  return text;
}

#if MINIDET_BENCH_CUPTI

class LaunchCounter {
 public:
  static constexpr bool available() { return true; }

  LaunchCounter() {
    ok_ = check(cuptiSubscribe(&subscriber_, &LaunchCounter::on_api, this), "cuptiSubscribe");
    if (!ok_) return;
    ok_ = check(cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API), "cuptiEnableDomain(runtime)") &&
          check(cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API), "cuptiEnableDomain(driver)");
  }
  ~LaunchCounter() {
    if (subscriber_) cuptiUnsubscribe(subscriber_);
  }
  LaunchCounter(const LaunchCounter&) = delete;
  LaunchCounter& operator=(const LaunchCounter&) = delete;

  // Launches seen since construction; -1 when CUPTI refused to subscribe (the reason went to stderr).
  int64_t launches() const { return ok_ ? launches_.load() : -1; }

  // The same launches by kernel, most launched first: where a step's launches come from. Names are
  // demangled; template arguments are kept, since they tell the elementwise functors apart.
  std::vector<std::pair<std::string, int64_t>> by_kernel() const {
    std::vector<std::pair<std::string, int64_t>> rows;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [symbol, n] : by_symbol_) rows.emplace_back(demangle(symbol), n);
    }
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    return rows;
  }

 private:
  static bool starts_with(const char* name, const char* prefix) {
    return name && std::strncmp(name, prefix, std::strlen(prefix)) == 0;
  }
  static bool is_runtime_launch(const char* name) {
    return starts_with(name, "cudaLaunchKernel") || starts_with(name, "cudaLaunchCooperativeKernel");
  }
  static bool is_driver_launch(const char* name) {
    return starts_with(name, "cuLaunchKernel") || starts_with(name, "cuLaunchCooperativeKernel") ||
           starts_with(name, "cuLaunchGrid");
  }

  void count(const CUpti_CallbackData* call) {
    ++launches_;
    std::lock_guard<std::mutex> lock(mutex_);
    ++by_symbol_[call->symbolName ? call->symbolName : "(unnamed)"];
  }

  static void CUPTIAPI on_api(void* self, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
    // Per thread: how many runtime launches are in progress (their driver calls are not new kernels).
    thread_local int runtime_launch_depth = 0;
    auto* counter = static_cast<LaunchCounter*>(self);
    const auto* call = static_cast<const CUpti_CallbackData*>(data);
    const bool enter = call->callbackSite == CUPTI_API_ENTER;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && is_runtime_launch(call->functionName)) {
      if (enter) {
        counter->count(call);
        ++runtime_launch_depth;
      } else {
        --runtime_launch_depth;
      }
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && enter && runtime_launch_depth == 0 &&
               is_driver_launch(call->functionName)) {
      counter->count(call);
    }
  }

  static bool check(CUptiResult result, const char* what) {
    if (result == CUPTI_SUCCESS) return true;
    const char* message = "unknown error";
    cuptiGetResultString(result, &message);
    std::fprintf(stderr, "warning: %s failed (%s): kernel launches will read n/a\n", what, message);
    return false;
  }

  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::atomic<int64_t> launches_{0};
  mutable std::mutex mutex_;
  std::map<std::string, int64_t> by_symbol_;  // mangled kernel symbol -> launches
  bool ok_ = false;
};

#else

// Built without CUPTI: nothing is counted.
class LaunchCounter {
 public:
  static constexpr bool available() { return false; }
  int64_t launches() const { return -1; }
  std::vector<std::pair<std::string, int64_t>> by_kernel() const { return {}; }
};

#endif

}  // namespace minidet::bench
