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
//   Work::wait():    host polls done (under the watchdog), then the default stream waits on done too
// so the bucket is read by NCCL only once it is filled, and read back by minidet only once it is reduced.
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

  // The sum over ranks, or with mean the average (ncclAvg).
  std::unique_ptr<Work> start_all_reduce(const Tensor& t, bool mean, Watchdog& watchdog, const std::string& what);
  void broadcast(const Tensor& t, int root, Watchdog& watchdog, const std::string& what);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace minidet::dist
