#include "core/cuda/graph.h"

#include <utility>

#include "core/cuda/availability.h"
#include "core/error.h"

#if MINIDET_WITH_CUDA
#include <mutex>
#include <vector>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#endif

namespace minidet::cuda {

#if MINIDET_WITH_CUDA

namespace {

// One capture stream per device, made once. It must not be the legacy stream, which cannot be captured;
// nothing ever runs on it (replays go to minidet's stream).
cudaStream_t capture_stream(int device) {
  static std::mutex mutex;
  static std::vector<cudaStream_t>* streams = new std::vector<cudaStream_t>();  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  if (static_cast<size_t>(device) >= streams->size()) streams->resize(device + 1, nullptr);
  cudaStream_t& stream = (*streams)[device];
  if (stream == nullptr) MINIDET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

}  // namespace

GraphPool::GraphPool(int device) : id_(create_private_pool()), device_(device) {}
GraphPool::~GraphPool() { release_private_pool(id_, device_); }

CudaGraph::CudaGraph(std::shared_ptr<GraphPool> pool) : pool_(std::move(pool)) {
  MINIDET_CHECK(pool_ != nullptr, "CudaGraph: expected a memory pool");
}

CudaGraph::~CudaGraph() {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}

void CudaGraph::capture(const std::function<void()>& work) {
  MINIDET_CHECK(exec_ == nullptr, "CudaGraph::capture: this graph was captured already");
  MINIDET_CHECK(!stream_overridden(), "CudaGraph::capture: a capture is already recording on this thread");
  DeviceGuard device(Device::cuda(pool_->device()));
  const cudaStream_t stream = capture_stream(pool_->device());
  // Thread-local mode: this thread may not make calls that would break the recording (a synchronous copy,
  // a synchronisation), while other threads (a data loader, NCCL's watchdog) go on undisturbed.
  MINIDET_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    StreamOverride on_capture_stream(stream);
    PrivatePoolScope in_pool(pool_->id(), pool_->device());
    work();
  } catch (...) {
    (void)cudaStreamEndCapture(stream, &graph);  // ends the (possibly invalidated) recording
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (ended != cudaSuccess) {
    (void)cudaGetLastError();
    MINIDET_FAIL("CudaGraph::capture: the recording was invalidated (", cudaGetErrorName(ended), ": ",
                 cudaGetErrorString(ended), "); the captured code used the legacy stream or synchronised");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  if (made != cudaSuccess) {
    (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    MINIDET_FAIL("CudaGraph::capture: cannot instantiate the graph (", cudaGetErrorName(made), ": ",
                 cudaGetErrorString(made), ")");
  }
  graph_ = graph;
  exec_ = exec;
}

void CudaGraph::replay() {
  MINIDET_CHECK(exec_ != nullptr, "CudaGraph::replay: nothing was captured");
  DeviceGuard device(Device::cuda(pool_->device()));
  MINIDET_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), current_stream()));
}

double time_replays_ms(const std::vector<CudaGraph*>& graphs, int rounds) {
  MINIDET_CHECK(rounds >= 1, "time_replays_ms: expected at least 1 round, got ", rounds);
  cudaEvent_t start = nullptr, stop = nullptr;
  MINIDET_CUDA_CHECK(cudaEventCreate(&start));
  MINIDET_CUDA_CHECK(cudaEventCreate(&stop));
  MINIDET_CUDA_CHECK(cudaEventRecord(start, current_stream()));
  for (int r = 0; r < rounds; ++r)
    for (CudaGraph* graph : graphs) graph->replay();
  MINIDET_CUDA_CHECK(cudaEventRecord(stop, current_stream()));
  MINIDET_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  MINIDET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return static_cast<double>(ms) / rounds;
}

#else  // CPU-only build

GraphPool::GraphPool(int) { fail_without_cuda("cuda::GraphPool"); }
GraphPool::~GraphPool() = default;
CudaGraph::CudaGraph(std::shared_ptr<GraphPool>) { fail_without_cuda("cuda::CudaGraph"); }
CudaGraph::~CudaGraph() = default;
void CudaGraph::capture(const std::function<void()>&) { fail_without_cuda("cuda::CudaGraph::capture"); }
void CudaGraph::replay() { fail_without_cuda("cuda::CudaGraph::replay"); }
double time_replays_ms(const std::vector<CudaGraph*>&, int) { fail_without_cuda("cuda::time_replays_ms"); }

#endif

}  // namespace minidet::cuda
