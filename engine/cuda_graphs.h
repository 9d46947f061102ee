// CudaGraphs: the training step's fixed-shape part, the backbone and the RPN head, replayed as CUDA graphs
// (nn/graphs/graphed_function.h), forward and backward, once two steps have warmed them up.
//
// The detector's code has one path: FasterRCNN calls (*backbone)(images) and the RPN calls
// (*head)(features). While a CudaGraphs object lives, those calls replay a graph instead of launching the
// module's kernels one by one (nn::Module::replace_forward, as torch.cuda.make_graphed_callables replaces a
// module's forward); destroying it gives the modules their own forward back. The results are the eager
// code's: the same kernels on the same values (tests/engine/test_cuda_graphs.cpp checks losses and weights
// over several steps). Everything after the head depends on the proposals, so its shapes change from step
// to step and it runs eagerly.
//
// Where graphs do not apply (the CPU, grad mode off, anomaly mode, new input shapes: see GraphedFunction),
// the replacement runs the module's own forward, so installing them is always safe. The engine's Trainer
// installs them on a GPU unless schedule.cuda_graphs is false.
#pragma once

#include <memory>

#include "models/faster_rcnn/faster_rcnn.h"
#include "nn/graphs/graphed_function.h"

namespace minidet::engine {

class CudaGraphs {
 public:
  explicit CudaGraphs(models::FasterRCNN& model);
  ~CudaGraphs();
  CudaGraphs(const CudaGraphs&) = delete;
  CudaGraphs& operator=(const CudaGraphs&) = delete;

  // Eager, captured and replayed calls, summed over the two graphs (a replayed step counts 2 replays).
  nn::GraphedCounts counts() const;
  // For benchmarks: the GPU time of both graphs' forward + backward replays (GraphedFunction::replay_gpu_ms).
  double replay_gpu_ms(int rounds = 20);

 private:
  models::FasterRCNN& model_;
  std::shared_ptr<nn::GraphedFunction> backbone_, rpn_head_;
};

}  // namespace minidet::engine
