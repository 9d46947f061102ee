// DistributedDataParallel: every rank trains the same model on its own share of each batch, and after each
// backward every rank holds the same gradients, the mean over ranks, so the same optimizer step keeps the
// copies identical. With a loss that is a mean over the batch, N ranks with b images each then take the
// step one process would take with N*b images.
//
//   dist::ProcessGroup& group = dist::ProcessGroup::world();
//   dist::DistributedDataParallel ddp(model, group);   // rank 0's parameters and buffers -> every rank
//   loss = model.forward(my_share_of_the_batch);
//   optimizer.zero_grad();
//   ddp.backward(loss);                                // backward + gradient averaging
//   optimizer.step();
//
// Buckets. The parameters that require grad are taken in the reverse of their registration order (roughly
// the order backward produces their gradients) and grouped into buckets of about bucket_mb megabytes (one
// dtype and device per bucket). A post-accumulate-grad hook on each parameter (autograd/engine.h) counts
// the bucket's missing gradients; when the last one arrives the bucket's all-reduce is started at once,
// while backward goes on with the layers below:
//   CUDA  NCCL on a separate stream, ordered by events (dist/nccl_communicator.h);
//   CPU   MPI_Iallreduce, advanced (MPI_Test) from each later hook and waited for at the end of backward;
//         MPI moves it forward only inside MPI calls, so the overlap is partial.
// Buckets are started strictly in index order (a bucket that is ready early waits for the ones before it),
// so every rank issues the same collectives in the same order, as MPI and NCCL require.
// Gradients are views of the buckets (PyTorch's gradient_as_bucket_view): ddp.backward() first points each
// .grad at its slot of a zeroed flat buffer, backward accumulates into it in place, and the all-reduce works
// on it in place, so no gradient is copied on the way in or out (a gradient that exists before backward,
// from no_sync or without zero_grad, is copied into its slot once). After a synchronised backward .grad is
// that view: keep no other handle to an old .grad and expect it to change.
// overlap = false starts nothing from the hooks: every bucket is reduced at the end of backward, blocking,
// one after the other. Both give the same numbers (tested).
//
// Unused parameters: a parameter that got no gradient in this backward (its branch was not used) is
// reduced as zeros, so the collectives still match across ranks, and it receives the mean of the others'
// gradients. A parameter that no rank used gets a zero gradient (not none): an optimizer with weight decay
// or momentum then moves it as it would for a zero gradient.
//
// Buffers (BatchNorm's running statistics) are computed by each rank on its own images; with
// broadcast_buffers (default) rank 0's are copied to every rank after each synchronised backward, so the
// ranks evaluate and checkpoint the same model (PyTorch's DDP copies them before each forward instead).
// For that the constructor packs the buffers into one flat tensor per dtype and device, each buffer a view
// of it: one broadcast per flat tensor, where one per buffer would be dozens of collectives per step.
//
// With one rank (a program run without mpirun) it does nothing at all: no buffers, no hooks, no copies, so
// single-process training is exactly what it was (unused parameters keep no gradient).
//
// Wrap the model once it is on its device and in its dtype: the buckets are allocated there, and the hooks
// are on the parameters (Module::to() keeps them, but the buckets would stay behind).
//
// no_sync(): while the guard lives, backward only accumulates into .grad locally; the next backward
// outside it reduces the accumulated sum. Gradient accumulation over k micro-batches costs one reduction.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "nn/module/module.h"

namespace minidet::dist {

struct DDPOptions {
  double bucket_mb = 4.0;        // a bucket closes once it holds at least this many MB of gradients
  bool overlap = true;           // start each bucket's all-reduce from the hooks, during backward
  bool broadcast_buffers = true; // copy rank 0's buffers to every rank after each synchronised backward
};

class DistributedDataParallel {
 public:
  // Collective: every rank must construct it with the same model (checked: names, shapes, dtypes).
  DistributedDataParallel(nn::Module& module, ProcessGroup& group, DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // loss.backward(), then finish_gradient_sync().
  void backward(const Tensor& loss);
  // For callers that run backward themselves: waits for the buckets the hooks started, reduces the others,
  // writes the means into .grad and copies the buffers. Every rank must call it after every backward.
  void finish_gradient_sync();

  // While alive, backward does not communicate (gradients accumulate locally).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // Bucket i's parameter names, in the order they were packed (tests and `describe`).
  std::vector<std::vector<std::string>> bucket_names() const;
  ProcessGroup& group() { return group_; }

  struct Reducer;  // the state the hooks share (dist/ddp.cpp)

 private:
  nn::Module& module_;
  ProcessGroup& group_;
  DDPOptions options_;
  std::shared_ptr<Reducer> reducer_;
};

}  // namespace minidet::dist
