#include "core/cuda/availability.h"

#include "core/error.h"

#if MINIDET_WITH_CUDA
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#endif

namespace minidet::cuda {

void fail_without_cuda(const char* what) {
  MINIDET_FAIL(what, ": minidet was built without CUDA (configure with nvcc available and MINIDET_CUDA=ON)");
}

#if MINIDET_WITH_CUDA

int device_count() {
  // Asked once: with no driver or no GPU the runtime returns an error, which here just means "none".
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool is_available() { return device_count() > 0; }

std::string pci_bus_id(int device) {
  char id[32] = "";
  if (cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return id;
}

void synchronize() {
  if (is_available()) MINIDET_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace {
thread_local cudaStream_t t_stream_override = nullptr;  // set while this thread captures a CUDA graph
}  // namespace

cudaStream_t current_stream() { return t_stream_override != nullptr ? t_stream_override : cudaStreamLegacy; }

bool stream_overridden() { return t_stream_override != nullptr; }

StreamOverride::StreamOverride(cudaStream_t stream) : previous_(t_stream_override) { t_stream_override = stream; }
StreamOverride::~StreamOverride() { t_stream_override = previous_; }

int current_device() {
  int device = 0;
  MINIDET_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

namespace {
// cuBLAS's workspace (split-K partial sums and the like): what PyTorch gives it on Hopper.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

}  // namespace

cublasHandle_t cublas_handle() {
  static std::mutex mutex;
  static std::vector<cublasHandle_t>* handles = new std::vector<cublasHandle_t>();  // never destroyed, see allocator
  const int device = current_device();
  std::lock_guard<std::mutex> lock(mutex);
  if (static_cast<size_t>(device) >= handles->size()) handles->resize(device + 1, nullptr);
  cublasHandle_t& handle = (*handles)[device];
  static std::vector<void*>* workspaces = new std::vector<void*>();
  if (static_cast<size_t>(device) >= workspaces->size()) workspaces->resize(device + 1, nullptr);
  void*& workspace = (*workspaces)[device];
  if (handle == nullptr) {
    MINIDET_CUBLAS_CHECK(cublasCreate(&handle));
    MINIDET_CUDA_CHECK(cudaMalloc(&workspace, kCublasWorkspaceBytes));
  }
  // The handle follows the current stream: a graph capture switches it to the capture stream and back.
  // cublasSetStream also resets the workspace to cuBLAS's own pool, which may allocate on a new stream (not
  // allowed while capturing), so it gets its one fixed workspace back each time. One workspace serves both
  // streams: nothing ever runs on the capture stream, and replays run in order with everything else.
  cudaStream_t stream = nullptr;
  MINIDET_CUBLAS_CHECK(cublasGetStream(handle, &stream));
  if (stream != current_stream()) {  // a new handle's stream is 0, not cudaStreamLegacy: set on first use
    MINIDET_CUBLAS_CHECK(cublasSetStream(handle, current_stream()));
    MINIDET_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace, kCublasWorkspaceBytes));
  }
  return handle;
}

namespace {

// A device attribute of the current device, read once per device and attribute.
int cached_attribute(cudaDeviceAttr attribute) {
  static std::mutex mutex;
  static std::vector<std::pair<cudaDeviceAttr, std::vector<int>>> values;  // per attribute, per device
  const int device = current_device();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = std::find_if(values.begin(), values.end(), [&](const auto& entry) { return entry.first == attribute; });
  if (it == values.end()) it = values.insert(values.end(), {attribute, {}});
  std::vector<int>& per_device = it->second;
  if (static_cast<size_t>(device) >= per_device.size()) per_device.resize(device + 1, -1);
  if (per_device[device] < 0) MINIDET_CUDA_CHECK(cudaDeviceGetAttribute(&per_device[device], attribute, device));
  return per_device[device];
}

}  // namespace

int multiprocessor_count() { return cached_attribute(cudaDevAttrMultiProcessorCount); }

int max_shared_memory_per_block() { return cached_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin); }

int64_t l2_cache_bytes() { return cached_attribute(cudaDevAttrL2CacheSize); }

namespace {

std::atomic<bool>& index64_switch() {
  static std::atomic<bool> forced{[] {
    const char* env = std::getenv("MINIDET_CUDA_INDEX64");
    return env != nullptr && env[0] == '1';
  }()};
  return forced;
}

}  // namespace

bool int64_index_forced() { return index64_switch().load(std::memory_order_relaxed); }

Int64IndexScope::Int64IndexScope() : previous_(index64_switch().exchange(true)) {}

Int64IndexScope::~Int64IndexScope() { index64_switch().store(previous_); }

DeviceGuard::DeviceGuard(const Device& device) {
  MINIDET_CHECK(device.is_cuda(), "DeviceGuard: expected a CUDA device, got ", device);
  MINIDET_CHECK(device.index >= 0 && device.index < device_count(), "DeviceGuard: ", device,
                " does not exist (", device_count(), " GPUs visible)");
  previous_ = current_device();
  if (previous_ != device.index) MINIDET_CUDA_CHECK(cudaSetDevice(device.index));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
}

void check_launch(const char* kernel_name, const char* file, int line) {
  cudaError_t err = cudaGetLastError();
  static const bool sync_checks = [] {
    const char* env = std::getenv("MINIDET_CUDA_SYNC_CHECKS");
    return env != nullptr && env[0] == '1';
  }();
  if (err == cudaSuccess && sync_checks) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    detail::throw_error(detail::compose("CUDA kernel ", kernel_name, " failed: ", cudaGetErrorName(err), " (",
                                        cudaGetErrorString(err), ")"),
                        file, line);
  }
}

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "unknown cuBLAS status";
  }
}

#else  // CPU-only build

int device_count() { return 0; }
bool is_available() { return false; }
std::string pci_bus_id(int) { return ""; }
void synchronize() {}

#endif

}  // namespace minidet::cuda
