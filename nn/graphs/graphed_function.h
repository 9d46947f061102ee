// GraphedFunction: a module's training forward and backward replayed as two CUDA graphs, as
// torch.cuda.make_graphed_callables does, and its inference forward as one (the graph machinery:
// core/cuda/graph.h).
//
// With f the wrapped function (a module's forward), x its inputs and θ the module's parameters, in grad mode:
//
//   calls 1..warmup     eager: y = f(x). Caches settle (cuBLAS, shared scalars), results are exact.
//   the next call       capture  G_fwd:  x̂ ← copy of x;  ŷ = f(x̂), with autograd recording     (nothing runs)
//                       capture  G_bwd:  (∂L/∂x̂, ∂L/∂θ) = autograd::grad(ŷ -> x̂, θ; ĝ)         (nothing runs)
//                       where x̂ (fixed inputs) and ĝ (fixed output gradients) are tensors this object
//                       owns, and ŷ, the activations f saved and the gradients live in the graphs' pool.
//   every later call    x̂ ← x; replay G_fwd; return y = ŷ, with ONE autograd node whose backward is
//                       ĝ ← dL/dy; replay G_bwd; return the fixed gradients ∂L/∂x̂ and ∂L/∂θ.
//
// With grad mode off (inference, as torch.cuda.graph is used under no_grad), the same warm-up, then one
// graph G_inf: ŷ = f(x̂) with nothing recorded, and every later call is x̂ ← x; replay G_inf; return ŷ. The
// two kinds are kept apart, each with its own warm-up, signature and pool, so an evaluation between training
// steps replays its graph and leaves the training graphs as they were.
//
// So a step pays one copy per input, one graph launch, one node, and in backward one copy per output and one
// launch, whatever f does inside: for the detector's backbone, hundreds of kernels, each of
// which would cost the host an op's bookkeeping and a launch (docs/benchmarks.md counts them). The results
// are those of the eager code: the same kernels on the same values (cuda/graphed_function tests it).
//
// Graphs are used only where they are right, and eager f runs otherwise:
// - every input a CUDA tensor, anomaly mode and backward tracing off (they need the nodes);
// - the same grad mode, input shapes, dtypes and requires_grad flags, deterministic mode, module mode
//   (train/eval), and parameter and buffer addresses as at capture (a graph holds raw pointers: moving the
//   module, loading tensors that replace parameters, or new input shapes all mean a new warm-up and capture);
// - in grad mode, the last replay's backward has run or can no longer run: a second replay would overwrite ŷ
//   and the saved activations under a backward still to come.
// What a caller must know: the outputs y are the graph's fixed buffers and the next replay overwrites them
// (keep a clone to hold them longer); a parameter's .grad becomes the graph's fixed gradient buffer when it
// had none (as stolen by AccumulateGrad; zero_grad(set_to_none) between steps, as training does), and an
// existing .grad that is that buffer is first copied out, so accumulation over steps stays right. Buffers
// updated inside f (BatchNorm's running statistics) are updated by every replay.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module/module.h"

namespace minidet::nn {

struct GraphedCounts {
  int64_t eager = 0;     // calls that ran f eagerly (warm-up, or graphs not applicable)
  int64_t captures = 0;  // forward + backward captures, and inference captures
  int64_t replays = 0;   // forward replays (each with its backward, when backward ran)
};

class GraphedFunction {
 public:
  using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

  // `modules` own the parameters and buffers f uses (their parameters get gradients); f must compute only
  // with CUDA work, no host copies or synchronisation (capture refuses those with a clear error).
  GraphedFunction(std::string name, std::vector<std::shared_ptr<Module>> modules, Function function,
                  int warmup_calls = 2);
  ~GraphedFunction();
  GraphedFunction(const GraphedFunction&) = delete;
  GraphedFunction& operator=(const GraphedFunction&) = delete;

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  const GraphedCounts& counts() const { return counts_; }
  // Drops the graphs and their memory; the next calls warm up and capture again.
  void reset();
  // For benchmarks: the GPU time of one training forward + backward replay, ms (mean of `rounds` back to
  // back; 0 when nothing is captured). The replays run for real: BatchNorm's running statistics move.
  double replay_gpu_ms(int rounds = 20);

 private:
  struct Captured;
  // The calls being warmed up or replayed in one grad mode: training (forward and backward graphs) or
  // inference (the forward graph alone). Each keeps its own graphs, so evaluations between training steps
  // replay theirs without a new capture of either.
  struct Slot {
    std::vector<int64_t> signature;  // of the calls being warmed up or captured
    int warm_calls = 0;
    std::shared_ptr<Captured> captured;
  };
  static constexpr int kTraining = 0, kInference = 1;
  bool applicable(const std::vector<Tensor>& inputs) const;
  std::vector<int64_t> signature(const std::vector<Tensor>& inputs) const;
  std::shared_ptr<Captured> capture(const std::vector<Tensor>& inputs);  // in the current grad mode
  std::vector<Tensor> replay(const std::shared_ptr<Captured>& captured, const std::vector<Tensor>& inputs);

  std::string name_;
  std::vector<Tensor> parameters() const;
  std::vector<std::shared_ptr<Module>> modules_;
  Function function_;
  int warmup_calls_;
  Slot slots_[2];  // kTraining, kInference
  GraphedCounts counts_;
};

}  // namespace minidet::nn
