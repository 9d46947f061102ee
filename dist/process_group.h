// ProcessGroup: the processes of one data-parallel job and the collectives between them.
//
// `mpirun -np N program` starts N copies of a program; each is a rank 0..N-1. ProcessGroup::world()
// initialises MPI on first use and answers who this process is:
//   rank()        0..size()-1 across all machines; rank 0 is the one that writes logs and checkpoints
//   local_rank()  0..local_size()-1 among the ranks of this machine (MPI_Comm_split_type SHARED), which
//                 picks this rank's GPU: cuda:local_rank (one GPU per rank)
//
// Collectives act in place on a contiguous tensor of the same shape, dtype and device on every rank, and
// every rank must call them in the same order:
//   CPU tensors   MPI_Allreduce / MPI_Iallreduce / MPI_Bcast on the tensor's memory
//   CUDA tensors  NCCL on a communicator created from an id that rank 0 broadcasts over MPI, on a stream of
//                 its own (when built with NCCL); otherwise copied to the host and reduced by MPI
//
// With more than one rank, world() also installs itself as the group of every nn::SyncBatchNorm2d
// (nn/layers/batch_norm.h): their statistics are all-reduced over all ranks.
//
// Built without MPI (cmake/MinidetDist.cmake), the group is this process alone: rank 0 of 1, and every
// collective is the identity. Programs need no #if: they run alone.
//
// Every blocking wait runs under a Watchdog scope (dist/watchdog.h): a collective that takes longer than the
// timeout prints "rank R of N: <operation> did not finish within T s ..." and MPI_Abort stops all ranks.
// NCCL collectives do not block the host (Work::wait() orders the GPU stream only); the watchdog's thread
// polls them instead and stops the job the same way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/watchdog.h"

namespace minidet::dist {

class NcclCommunicator;

// A collective that was started and may still be running. wait() blocks until it is complete and its
// result is in the tensor (for CUDA: until the reduction kernel has finished on the GPU).
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  // Lets the transport advance without blocking (MPI progresses a non-blocking collective only inside MPI
  // calls); DDP calls it from each gradient hook.
  virtual void poll() {}
};

class ProcessGroup {
 public:
  // The group of all processes (MPI_COMM_WORLD). The first call initialises MPI; MPI is finalised at exit.
  static ProcessGroup& world();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool is_main() const { return rank_ == 0; }
  const std::string& host() const { return host_; }  // this machine's host name
  bool with_mpi() const;   // built with MPI (else always rank 0 of 1)
  bool with_nccl() const;  // CUDA tensors go through NCCL
  // "rank 1 of 4 (local 1 of 2 on gpu-a)": for messages.
  std::string describe() const;

  // This rank's device: the CPU, or for cuda (auto picks cuda when a GPU answers) cuda:local_rank.
  // Refuses when this machine runs more ranks than it has GPUs.
  Device pick_device(const std::string& device) const;

  // Seconds a collective may block before the watchdog aborts the job; <= 0 disables it. Call before the
  // first collective (it restarts the watchdog thread).
  void set_timeout(double seconds);

  // In place: t becomes the sum over ranks. `what` names the operation in timeout messages.
  void all_reduce_sum(const Tensor& t, const std::string& what);
  // Starts the same sum and returns at once; the tensor must not be touched until Work::wait() returns.
  std::unique_ptr<Work> start_all_reduce_sum(const Tensor& t, const std::string& what);
  // The same for the mean over ranks (floating tensors): NCCL averages itself (ncclAvg); for MPI, which has
  // no mean, wait() divides the sum by size() on the host. Every rank computes the same bits.
  std::unique_ptr<Work> start_all_reduce_mean(const Tensor& t, const std::string& what);
  // In place: every rank gets root's values.
  void broadcast(const Tensor& t, int root, const std::string& what);
  void broadcast(std::string& text, int root, const std::string& what);
  void barrier(const std::string& what);
  // Sums a few host numbers (loss values, flags) over ranks.
  std::vector<double> all_reduce_sum(std::vector<double> values, const std::string& what);
  // Rank 0 gets every rank's values concatenated in rank order; the others get an empty vector.
  std::vector<double> gather_to_main(const std::vector<double>& values, const std::string& what);
  // Rank 0 gets every rank's text, in rank order; the others get an empty vector.
  std::vector<std::string> gather_to_main(const std::string& text, const std::string& what);

  // Prints "minidet: rank R of N: <message>" to stderr and stops every rank (MPI_Abort), or the process.
  [[noreturn]] void abort(const std::string& message, int exit_code = 1) const;

  ~ProcessGroup();

 private:
  ProcessGroup();
  Watchdog::Scope watch(const std::string& what);
  NcclCommunicator& nccl_for(const Tensor& t);
  void install_nccl_check();  // the watchdog's background check of the NCCL collectives queued on the GPU
  std::unique_ptr<Work> start_all_reduce(const Tensor& t, bool mean, const std::string& what);  // created by the first CUDA collective

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<NcclCommunicator> nccl_;
};

}  // namespace minidet::dist
