// See process_group.h: who this process is (MPI set-up, the local rank and its GPU), the watchdog, and
// stopping the job. The collectives themselves are in collectives.cpp. The MPI calls are inside
// #if MINIDET_WITH_MPI; without MPI the group is this process alone.
#include "dist/process_group.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "core/cuda/availability.h"
#include "core/error.h"
#include "dist/nccl_communicator.h"
#include "nn/layers/batch_norm.h"

#if MINIDET_WITH_MPI
#include <mpi.h>
#endif
#if MINIDET_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace minidet::dist {

#if MINIDET_WITH_MPI
namespace {

// Launched by mpirun (Open MPI), mpiexec.hydra (MPICH) or a PMIx launcher such as srun? Only then is MPI
// initialised: a program started on its own stays a plain single process (no singleton MPI start-up).
bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

}  // namespace
#endif

ProcessGroup& ProcessGroup::world() {
  static ProcessGroup group;
  return group;
}

ProcessGroup::ProcessGroup() {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  host_ = host;
#if MINIDET_WITH_MPI
  if (launched_by_mpi()) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    // MULTIPLE: the watchdog thread may call MPI_Abort while the training thread waits in a collective.
    int provided = 0;
    if (!initialized) MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;  // the ranks that share this machine's memory: their order picks the GPUs
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
  }
#endif
  set_timeout(600);
  // SyncBatchNorm2d layers normalise over every rank of the job, as PyTorch's over its default group.
  if (size_ > 1)
    nn::set_sync_batch_norm_group({size_, [this](const Tensor& t) { all_reduce_sum(t, "SyncBatchNorm statistics"); }});
}

ProcessGroup::~ProcessGroup() {
  nn::set_sync_batch_norm_group({});
  watchdog_.reset();
  // Left to the process's end on purpose: this runs at exit, possibly after the CUDA runtime was torn down,
  // when ncclCommDestroy could fail; the driver reclaims the communicator with the process.
  (void)nccl_.release();
#if MINIDET_WITH_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
#endif
}

bool ProcessGroup::with_mpi() const { return MINIDET_WITH_MPI != 0; }
bool ProcessGroup::with_nccl() const { return MINIDET_WITH_NCCL != 0; }

std::string ProcessGroup::describe() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (local " + std::to_string(local_rank_) +
         " of " + std::to_string(local_size_) + " on " + host_ + ")";
}

Device ProcessGroup::pick_device(const std::string& device) const {
  MINIDET_CHECK(device == "auto" || device == "cpu" || device == "cuda", "--device must be auto, cpu or cuda, not '",
                device, "'");
  if (device == "cpu" || (device == "auto" && !cuda::is_available())) return Device::cpu();
  MINIDET_CHECK(cuda::is_available(), "--device cuda: no GPU answers on ", host_);
  MINIDET_CHECK(local_rank_ < cuda::device_count(), describe(), ": this machine runs ", local_size_,
                " ranks but has ", cuda::device_count(), " GPUs; start at most one rank per GPU, or use --device cpu");
#if MINIDET_WITH_CUDA
  // Also this process's current device: otherwise the first CUDA call of every rank would open a context on
  // GPU 0 (ops switch devices per call, and switch back to the current one).
  MINIDET_CHECK(cudaSetDevice(local_rank_) == cudaSuccess, describe(), ": cannot use cuda:", local_rank_);
#endif
  return Device::cuda(local_rank_);
}

void ProcessGroup::set_timeout(double seconds) {
  watchdog_.reset();
  watchdog_ = std::make_unique<Watchdog>(seconds, [this](const std::string& message) { abort(message, 124); });
  if (nccl_) install_nccl_check();
}

void ProcessGroup::install_nccl_check() {
  // nccl_ is set before this and never changes until the watchdog is gone (see ~ProcessGroup).
  NcclCommunicator* nccl = nccl_.get();
  const double timeout = watchdog_->timeout_seconds();
  watchdog_->set_background_check([nccl, timeout] { return nccl->check(timeout); });
}

Watchdog::Scope ProcessGroup::watch(const std::string& what) { return Watchdog::Scope(*watchdog_, what); }


void ProcessGroup::abort(const std::string& message, int exit_code) const {
  std::fprintf(stderr, "minidet: %s: %s\n", describe().c_str(), message.c_str());
  std::fflush(stderr);
#if MINIDET_WITH_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, exit_code);
#endif
  std::_Exit(exit_code);
}


}  // namespace minidet::dist
