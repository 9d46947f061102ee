// See nccl_communicator.h. Everything NCCL-specific lives in this file.
#include "dist/nccl_communicator.h"

#include "core/error.h"

#if MINIDET_WITH_NCCL
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <thread>

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

// A started NCCL collective: `done` is recorded on the NCCL stream after it.
class NcclWork final : public Work {
 public:
  NcclWork(cudaEvent_t done, ncclComm_t comm, Watchdog& watchdog, std::string what)
      : done_(done), comm_(comm), watchdog_(watchdog), what_(std::move(what)) {}
  ~NcclWork() override { cudaEventDestroy(done_); }
  void wait() override {
    // Poll instead of cudaEventSynchronize, so that a hung peer shows up as a watchdog timeout naming the
    // operation rather than as a process blocked inside the driver, and so that NCCL's asynchronous errors
    // (a peer's connection lost, a failed proxy) become an error here rather than a wait that never ends.
    Watchdog::Scope scope(watchdog_, what_);
    cudaError_t status;
    while ((status = cudaEventQuery(done_)) == cudaErrorNotReady) {
      ncclResult_t async_error = ncclSuccess;
      MINIDET_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async_error));
      if (async_error != ncclSuccess && async_error != ncclInProgress)
        MINIDET_FAIL(what_, ": NCCL reported an asynchronous error: ", ncclGetErrorString(async_error));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    MINIDET_CUDA_CHECK(status);
    MINIDET_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done_, 0));
  }

 private:
  cudaEvent_t done_;
  ncclComm_t comm_;
  Watchdog& watchdog_;
  std::string what_;
};

}  // namespace

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  Device device;

  // Queues one NCCL call on the NCCL stream, ordered after everything queued so far on minidet's stream
  // (the ready event), and returns the Work that waits for it (the done event). See the header's picture.
  template <typename NcclCall>
  std::unique_ptr<Work> enqueue(NcclCall&& call, Watchdog& watchdog, const std::string& what) {
    cuda::DeviceGuard guard(device);
    cudaEvent_t ready, done;
    MINIDET_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    MINIDET_CUDA_CHECK(cudaEventRecord(ready, cuda::current_stream()));
    MINIDET_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
    MINIDET_CUDA_CHECK(cudaEventDestroy(ready));  // safe once waited on: CUDA frees it when the wait is done
    MINIDET_NCCL_CHECK(call(comm, stream));
    MINIDET_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    MINIDET_CUDA_CHECK(cudaEventRecord(done, stream));
    return std::make_unique<NcclWork>(done, comm, watchdog, what);
  }

  void check_device(const Tensor& t, const std::string& what) const {
    MINIDET_CHECK(t.device() == device, what, ": tensor on ", t.device(), ", NCCL communicator on ", device);
  }
};

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
  if (state_->stream) cudaStreamDestroy(state_->stream);
  if (state_->comm) ncclCommDestroy(state_->comm);
}

std::unique_ptr<Work> NcclCommunicator::start_all_reduce(const Tensor& t, bool mean, Watchdog& watchdog,
                                                         const std::string& what) {
  state_->check_device(t, what);
  const auto count = static_cast<size_t>(t.numel());
  const ncclDataType_t type = nccl_type(t.dtype());
  return state_->enqueue(
      [&](ncclComm_t comm, cudaStream_t stream) {
        return ncclAllReduce(t.raw_data(), t.raw_data(), count, type, mean ? ncclAvg : ncclSum, comm, stream);
      },
      watchdog, what);
}

void NcclCommunicator::broadcast(const Tensor& t, int root, Watchdog& watchdog, const std::string& what) {
  state_->check_device(t, what);
  const auto count = static_cast<size_t>(t.numel());
  const ncclDataType_t type = nccl_type(t.dtype());
  state_->enqueue(
             [&](ncclComm_t comm, cudaStream_t stream) {
               return ncclBroadcast(t.raw_data(), t.raw_data(), count, type, root, comm, stream);
             },
             watchdog, what)
      ->wait();
}

}  // namespace minidet::dist

#else  // built without NCCL: ProcessGroup never creates one; these only satisfy the linker.

namespace minidet::dist {
struct NcclCommunicator::State {};
NcclCommunicator::NcclCommunicator(int, int, const Device&) { MINIDET_FAIL("minidet was built without NCCL"); }
NcclCommunicator::~NcclCommunicator() = default;
std::unique_ptr<Work> NcclCommunicator::start_all_reduce(const Tensor&, bool, Watchdog&, const std::string&) {
  MINIDET_FAIL("minidet was built without NCCL");
}
void NcclCommunicator::broadcast(const Tensor&, int, Watchdog&, const std::string&) {
  MINIDET_FAIL("minidet was built without NCCL");
}
}  // namespace minidet::dist

#endif
