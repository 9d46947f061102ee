// See nccl_communicator.h. Everything NCCL-specific lives in this file.
#include "dist/nccl_communicator.h"

#include "core/error.h"

#if MINIDET_WITH_NCCL
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>

#include "core/cuda/check.h"
#include "core/cuda/context.h"

#define MINIDET_NCCL_CHECK(expr)                                                                  \
  do {                                                                                            \
    const ncclResult_t minidet_nccl_ = (expr);                                                    \
    if (minidet_nccl_ != ncclSuccess)                                                             \
      MINIDET_FAIL("NCCL call `", #expr, "` failed: ", ncclGetErrorString(minidet_nccl_));        \
  } while (0)

namespace minidet::dist {

namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case kFloat32: return ncclFloat32;
    case kFloat64: return ncclFloat64;
    case kInt64: return ncclInt64;
    default: MINIDET_FAIL("NCCL all-reduce: dtype ", dtype, " is not supported (float32, float64, int64)");
  }
}

}  // namespace

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  Device device;

  // Collectives whose Work was waited for (minidet's stream ordered after them) and that the GPU has not
  // yet been seen to finish, oldest first; check() forgets the finished ones. The watchdog's thread reads it.
  struct Pending {
    cudaEvent_t done;
    std::string what;
    std::chrono::steady_clock::time_point queued;
  };
  std::mutex mutex;
  std::deque<Pending> pending;

  void check_device(const Tensor& t, const std::string& what) const {
    MINIDET_CHECK(t.device() == device, what, ": tensor on ", t.device(), ", NCCL communicator on ", device);
  }

  // Queues one NCCL call on the NCCL stream, ordered after everything queued so far on minidet's stream
  // (the ready event), and returns the Work that orders minidet's stream after it (the done event).
  template <typename NcclCall>
  std::unique_ptr<Work> enqueue(NcclCall&& call, const std::string& what);
};

namespace {

// A started NCCL collective: `done` is recorded on the NCCL stream after it.
class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator::State& state, cudaEvent_t done, std::string what)
      : state_(state), done_(done), what_(std::move(what)) {}
  ~NcclWork() override {
    if (done_) cudaEventDestroy(done_);
  }
  // The host does not block: minidet's stream waits for `done` on the GPU, so the host goes on queueing the
  // rest of backward and the optimizer step (a host wait here would serialise every step with the GPU).
  // A collective that never finishes is caught by the watchdog's background check, which polls `done`.
  void wait() override {
    if (!done_) return;
    MINIDET_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done_, 0));
    std::lock_guard<std::mutex> lock(state_.mutex);
    state_.pending.push_back({done_, std::move(what_), std::chrono::steady_clock::now()});
    done_ = nullptr;  // the pending list owns it now
  }

 private:
  NcclCommunicator::State& state_;
  cudaEvent_t done_;
  std::string what_;
};

}  // namespace

template <typename NcclCall>
std::unique_ptr<Work> NcclCommunicator::State::enqueue(NcclCall&& call, const std::string& what) {
  cuda::DeviceGuard guard(device);
  cudaEvent_t ready, done;
  MINIDET_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  MINIDET_CUDA_CHECK(cudaEventRecord(ready, cuda::current_stream()));
  MINIDET_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
  MINIDET_CUDA_CHECK(cudaEventDestroy(ready));  // safe once waited on: CUDA frees it when the wait is done
  MINIDET_NCCL_CHECK(call(comm, stream));
  MINIDET_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  MINIDET_CUDA_CHECK(cudaEventRecord(done, stream));
  return std::make_unique<NcclWork>(*this, done, what);
}

NcclCommunicator::NcclCommunicator(int rank, int size, const Device& device) : state_(std::make_unique<State>()) {
  state_->device = device;
  cuda::DeviceGuard guard(device);
  ncclUniqueId id;
  if (rank == 0) MINIDET_NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  MINIDET_NCCL_CHECK(ncclCommInitRank(&state_->comm, size, id, rank));
  MINIDET_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
}

NcclCommunicator::~NcclCommunicator() {
  for (const State::Pending& p : state_->pending) cudaEventDestroy(p.done);
  if (state_->stream) cudaStreamDestroy(state_->stream);
  if (state_->comm) ncclCommDestroy(state_->comm);
}

std::unique_ptr<Work> NcclCommunicator::start_all_reduce(const Tensor& t, bool mean, const std::string& what) {
  state_->check_device(t, what);
  const auto count = static_cast<size_t>(t.numel());
  const ncclDataType_t type = nccl_type(t.dtype());
  return state_->enqueue(
      [&](ncclComm_t comm, cudaStream_t stream) {
        return ncclAllReduce(t.raw_data(), t.raw_data(), count, type, mean ? ncclAvg : ncclSum, comm, stream);
      },
      what);
}

void NcclCommunicator::broadcast(const Tensor& t, int root, const std::string& what) {
  state_->check_device(t, what);
  const auto count = static_cast<size_t>(t.numel());
  const ncclDataType_t type = nccl_type(t.dtype());
  state_->enqueue(
             [&](ncclComm_t comm, cudaStream_t stream) {
               return ncclBroadcast(t.raw_data(), t.raw_data(), count, type, root, comm, stream);
             },
             what)
      ->wait();
}

std::string NcclCommunicator::check(double timeout_seconds) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto& pending = state_->pending;
  while (!pending.empty()) {
    const cudaError_t status = cudaEventQuery(pending.front().done);
    if (status == cudaErrorNotReady) break;
    // The process is exiting and the CUDA runtime is being torn down under this (watchdog) thread: the
    // collectives of a finished job are not an error.
    if (status == cudaErrorCudartUnloading) return "";
    if (status != cudaSuccess) return pending.front().what + ": CUDA error: " + cudaGetErrorString(status);
    cudaEventDestroy(pending.front().done);
    pending.pop_front();
  }
  ncclResult_t async_error = ncclSuccess;
  if (ncclCommGetAsyncError(state_->comm, &async_error) == ncclSuccess && async_error != ncclSuccess &&
      async_error != ncclInProgress)
    return std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(async_error);
  if (pending.empty() || timeout_seconds <= 0) return "";
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - pending.front().queued).count();
  if (waited < timeout_seconds) return "";
  char message[512];
  std::snprintf(message, sizeof message,
                "%s did not finish on the GPU within %.0f s (--dist-timeout): another rank died, hangs or is far "
                "behind",
                pending.front().what.c_str(), timeout_seconds);
  return message;
}

}  // namespace minidet::dist

#else  // built without NCCL: ProcessGroup never creates one; these only satisfy the linker.

namespace minidet::dist {
struct NcclCommunicator::State {};
NcclCommunicator::NcclCommunicator(int, int, const Device&) { MINIDET_FAIL("minidet was built without NCCL"); }
NcclCommunicator::~NcclCommunicator() = default;
std::unique_ptr<Work> NcclCommunicator::start_all_reduce(const Tensor&, bool, const std::string&) {
  MINIDET_FAIL("minidet was built without NCCL");
}
void NcclCommunicator::broadcast(const Tensor&, int, const std::string&) {
  MINIDET_FAIL("minidet was built without NCCL");
}
std::string NcclCommunicator::check(double) { return ""; }
}  // namespace minidet::dist

#endif
