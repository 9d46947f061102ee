// CudaGraphs: the training step's fixed-shape parts replayed as CUDA graphs (nn/graphs/graphed_function.h),
// forward and backward, once two steps have warmed them up:
//   the backbone          images -> features
//   the RPN head          features -> objectness, deltas
//   the RoI box stage     features and the sampled rows -> the box head's two losses (RoIAlign, the MLP,
//                         cross-entropy and smooth L1: RoIHeads::box_losses)
// Each has the same shapes at every step of a run with the default options: the sampler keeps K rows per
// image, padded, so the second stage's inputs do not change shape with the data as long as every image has
// at least batch_size_per_image candidates (RoIHeads::box_losses; otherwise a change of shape means a new
// warm-up and capture, see GraphedFunction).
//
// The detector's code has one path: FasterRCNN calls (*backbone)(images), the RPN calls (*head)(features)
// and the RoI heads call box_losses(features, sample). While a CudaGraphs object lives, those calls replay a
// graph instead of launching the module's kernels one by one (nn::Module::replace_forward, as
// torch.cuda.make_graphed_callables replaces a module's forward); destroying it gives the modules their own
// code back. The results are the eager code's: the same kernels on the same values
// (tests/engine/test_cuda_graphs.cpp checks losses, gradients and weights over several steps). What runs
// eagerly in between: the RPN's targets and the RoI sampling, which match each image's own number of
// objects and draw the samplers' random numbers on the host, and the RPN's proposals, which have fixed
// shapes but run without gradients, which GraphedFunction does not capture.
//
// What a caller must know: the box stage's two losses, like the backbone's features, are the graph's fixed
// buffers, which the next step's replay overwrites (the Trainer copies them into its loss table at once).
//
// Inference (FasterRCNN::forward_infer, grad mode off) replays its own forward graphs of the backbone and
// the RPN head, captured after two warm-up calls as in training: an evaluation between training steps, or a
// benchmark's inference batches, launch those two stages at once, and the training graphs stay as they are.
//
// Where graphs do not apply (the CPU, anomaly mode, new input shapes: see GraphedFunction), the replacement
// runs the module's own code, so installing them is always safe. The engine's Trainer installs them on a GPU
// unless schedule.cuda_graphs is false.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/faster_rcnn/faster_rcnn.h"
#include "nn/graphs/graphed_function.h"

namespace minidet::engine {

class CudaGraphs {
 public:
  explicit CudaGraphs(models::FasterRCNN& model);
  ~CudaGraphs();
  CudaGraphs(const CudaGraphs&) = delete;
  CudaGraphs& operator=(const CudaGraphs&) = delete;

  // Eager, captured and replayed calls, summed over the three stages (a replayed step counts 3 replays, an
  // inference batch 2).
  nn::GraphedCounts counts() const;
  // For benchmarks: the GPU time of every stage's forward + backward replays (GraphedFunction::replay_gpu_ms).
  double replay_gpu_ms(int rounds = 20);
  // The same, stage by stage: (name, ms) for the backbone, the RPN head and the box stage.
  std::vector<std::pair<std::string, double>> stage_replay_gpu_ms(int rounds = 20);

 private:
  models::FasterRCNN& model_;
  std::shared_ptr<nn::GraphedFunction> backbone_, rpn_head_, box_stage_;
};

}  // namespace minidet::engine
