// NcclCommunicator: all-reduce and broadcast of CUDA tensors with NCCL, for dist::ProcessGroup.
//
// Created collectively (every rank at once, over MPI): rank 0 asks NCCL for a unique id, broadcasts its
// bytes with MPI_Bcast, and every rank joins the communicator with (id, rank, size) on its own GPU.
//
// NCCL runs on a stream of its own, created non-blocking: minidet queues all other work on the legacy
// default stream (core/cuda/context.h), which would otherwise serialise with every stream and leave no
// overlap. The order between the two streams is kept with events:
//   default stream:  ... grads copied into the bucket --record(ready)
//   NCCL stream:                    wait(ready) -- ncclAllReduce(bucket) --record(done)
//   Work::wait():    the default stream waits on done (on the GPU: the host never blocks here)
// so the bucket is read by NCCL only once it is filled, and read back by minidet only once it is reduced,
// while the host goes on queueing the rest of the step. No host thread waits for `done`, so the watchdog's
// thread polls it (check()): a collective that never finishes, or an asynchronous NCCL error (a peer lost),
// still stops the job within about a second of the timeout.
//
// Compiled only when nccl.h was found (MINIDET_WITH_NCCL); otherwise every method refuses. Needs NCCL 2.14 or
// later (ncclAvg, ncclInProgress).
#pragma once

#include <memory>
#include <string>

#include "core/tensor.h"
#include "dist/process_group.h"

namespace minidet::dist {

class NcclCommunicator {
 public:
  NcclCommunicator(int rank, int size, const Device& device);  // collective: every rank calls it
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // The sum over ranks, or with mean the average (ncclAvg). Work::wait() does not block the host.
  std::unique_ptr<Work> start_all_reduce(const Tensor& t, bool mean, const std::string& what);
  // Queued and waited for the same way: later work on minidet's stream sees root's values.
  void broadcast(const Tensor& t, int root, const std::string& what);

  // Forgets the collectives the GPU has finished. Returns "" while all is well, else why the job must stop:
  // NCCL's asynchronous error, or the oldest collective still unfinished after timeout_seconds (<= 0: no
  // limit). The watchdog's thread calls it once a second; it is safe to call from any thread.
  std::string check(double timeout_seconds);

  struct State;  // public only for the Work objects in the .cpp

 private:
  std::unique_ptr<State> state_;
};

}  // namespace minidet::dist
