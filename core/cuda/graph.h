// CudaGraph: a stretch of GPU work recorded once and then replayed with one launch.
//
// A training step of a small detector is bound by the host: it launches hundreds of small kernels, each of
// which costs the host more time (the op's bookkeeping, the autograd graph, the launch itself) than the GPU
// takes to run it (docs/benchmarks.md has the counts and times). A CUDA graph removes that cost for code
// whose shapes never change: capture() runs the code once with every launch *recorded* instead of run, and
// replay() then queues the whole recording at once.
//
//   capture:  the thread's current_stream() becomes a capture stream (core/cuda/context.h), so every
//             kernel, cuBLAS call and device-to-device copy is recorded with its arguments: the same
//             pointers, sizes and scalars at every replay. Nothing runs.
//   memory:   every tensor the captured code allocates comes from the graph's private pool
//             (core/cuda/caching_allocator.h): a replay writes those blocks again whenever it runs, so no
//             one else may ever be handed them. Graphs that pass tensors to each other (a forward and its
//             backward) share one pool.
//   replay:   cudaGraphLaunch on minidet's stream, in order with everything else.
//
// What captured code may not do (each is a clear error at capture time): copy between the host and the
// device (a replay would not copy new bytes, and a download cannot finish while nothing runs), or
// synchronise. Inputs enter through fixed device tensors that the caller overwrites before each replay;
// outputs are fixed tensors that each replay overwrites. nn/graphs/graphed_function.h builds autograd on
// this: a module's forward and backward as two graphs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace minidet::cuda {

// A private pool shared by the graphs that hold it; its blocks return to the cache when the last one goes.
class GraphPool {
 public:
  explicit GraphPool(int device);
  ~GraphPool();
  GraphPool(const GraphPool&) = delete;
  GraphPool& operator=(const GraphPool&) = delete;
  uint64_t id() const { return id_; }
  int device() const { return device_; }

 private:
  uint64_t id_ = 0;
  int device_ = 0;
};

class CudaGraph {
 public:
  explicit CudaGraph(std::shared_ptr<GraphPool> pool);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Records what `work` queues on the GPU (nothing runs), then makes it replayable. Throws, leaving the
  // graph empty, when `work` throws or does something a graph cannot hold (see above).
  void capture(const std::function<void()>& work);
  // Queues the recorded work on minidet's stream. Requires a successful capture().
  void replay();
  bool captured() const { return exec_ != nullptr; }
  const std::shared_ptr<GraphPool>& pool() const { return pool_; }

 private:
  std::shared_ptr<GraphPool> pool_;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

// For benchmarks: the GPU time of replaying `graphs` in order, `rounds` times back to back (CUDA events
// around all of them), in ms per round. The replays do their work for real.
double time_replays_ms(const std::vector<CudaGraph*>& graphs, int rounds);

}  // namespace minidet::cuda
