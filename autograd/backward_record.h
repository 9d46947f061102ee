// The backward recorder: what the backward explorer (autograd/backward_html.h) shows, captured from one run
// of the engine.
//
//   autograd::ScopeRecordingGuard scopes;                 // nodes remember their module (autograd/scope.h)
//   Tensor loss = model(x) ...;
//   autograd::BackwardRecord record = autograd::record_backward({loss});   // runs backward, as loss.backward()
//
// For every node the engine runs it keeps, in the engine's execution order:
//   - the op name, the module scope that created it, the source file of the op that recorded it;
//   - the forward inputs' and outputs' shapes and dtypes, and where each input's gradient went (the edges);
//   - a summary of each gradient that arrived (one per forward output) and that it sent (one per input);
//   - for a leaf's AccumulateGrad: the leaf's name and its .grad once accumulated.
// A summary holds the norm, mean, min, max, max |x|, NaN and Inf counts and a histogram of every gradient;
// the values themselves for tensors of at most RecordOptions::max_values elements; and a small 2-D heat map
// (preview) of larger ones. Values are copied to the host, so CUDA runs record the same way as CPU runs
// (at the cost of one copy per gradient: the recorder is for looking, not for training).
//
// A record is plain data: to_json() writes it and from_json() reads it back, so a run on a machine without
// Graphviz (a GPU server, say) can record, and the page can be made elsewhere (minidet explain --record).
// Recording costs nothing unless record_backward (or a BackwardRecorder) is active: the engine tests one
// thread-local pointer per node.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"

namespace minidet::autograd {

struct RecordOptions {
  int64_t max_values = 4096;     // tensors with at most this many elements keep every value
  int histogram_bins = 16;       // bins between the finite min and max
  int64_t preview_side = 32;     // heat maps: at most preview_side x preview_side cells
  std::string title;             // shown at the top of the page, e.g. "one training step of the detector"
};

// A 2-D map of a tensor of 2 or more dimensions, for heat maps: rows x cols values, row-major, over its last
// two dimensions. A matrix gives its own (signed) values; a tensor with more dimensions the mean |x| over the
// leading ones (signs would cancel in a sum: where does the gradient land, in any channel?). Larger than
// preview_side on a side, it is averaged over blocks. `what` says which, e.g. "values" or
// "mean |x| over dims 0-1, block mean 2x2". NaN and Inf count as 0 (the summary counts them).
struct HeatMap {
  int64_t rows = 0, cols = 0;
  std::vector<double> values;
  std::string what;
};

struct TensorSummary {
  Shape sizes;
  std::string dtype;          // "float32", "float64", ...
  int64_t numel = 0;
  double norm = 0, mean = 0, min = 0, max = 0, max_abs = 0;  // over the finite values
  int64_t nan_count = 0, inf_count = 0;
  double histogram_low = 0, histogram_high = 0;  // the range of the bins
  std::vector<int64_t> histogram;                // counts of finite values per bin
  std::vector<double> values;                    // every value, row-major, when numel <= max_values
  std::optional<HeatMap> heat_map;               // for tensors of 2 or more dimensions

  static TensorSummary of(const Tensor& tensor, const RecordOptions& options);
};

struct RecordedTensorMeta {
  Shape sizes;
  std::string dtype;
};

struct RecordedEdge {
  int64_t to = -1;       // the sequence number (RecordedNode::id) of the node this input's gradient goes to
  uint32_t slot = 0;     // which of that node's forward outputs it is the gradient of
};

struct RecordedNode {
  int64_t id = 0;        // Node::sequence_nr: creation order, unique within the process
  int64_t step = 0;      // 1-based position in the engine's execution order
  std::string op;        // Node::name(): "conv2d", "roi_align", "AccumulateGrad"
  std::string scope;     // the module that created it ("" when scopes were not recorded or at the top)
  std::string source;    // the file that recorded the op, from the repository root ("ops/conv2d/conv2d.cpp")
  std::string leaf;      // AccumulateGrad only: the leaf's name (autograd::set_name), "" if unnamed
  std::vector<std::string> output_names;          // names of its outputs given with set_name ("" if none)
  std::vector<RecordedTensorMeta> inputs;         // forward inputs
  std::vector<RecordedTensorMeta> outputs;        // forward outputs
  std::vector<RecordedEdge> edges;                // one per forward input; to = -1: needs no gradient
  std::vector<std::optional<TensorSummary>> grads_in;   // per forward output: the gradient that arrived
  std::vector<std::optional<TensorSummary>> grads_out;  // per forward input: the gradient sent (nullopt: none)
  std::optional<TensorSummary> leaf_grad;         // AccumulateGrad only: the leaf's .grad after this step

  bool is_leaf() const { return op == "AccumulateGrad"; }
};

struct BackwardRecord {
  RecordOptions options;
  std::string device;                 // of the roots: "cpu", "cuda:0"
  std::vector<RecordedNode> nodes;    // in execution order: nodes[i].step == i + 1

  std::string to_json() const;
  static BackwardRecord from_json(const std::string& text);  // throws minidet::Error naming what is wrong
  // The node with this id, or null.
  const RecordedNode* find(int64_t id) const;
};

// Records the next backward passes run on this thread (by loss.backward(), autograd::backward or grad)
// while alive. Nested recorders: the innermost records.
class BackwardRecorder {
 public:
  explicit BackwardRecorder(RecordOptions options = {});
  ~BackwardRecorder();
  BackwardRecorder(const BackwardRecorder&) = delete;
  BackwardRecorder& operator=(const BackwardRecorder&) = delete;

  // The recorder of this thread, or null (what the engine asks once per backward).
  static BackwardRecorder* active();
  // Called by the engine after each node has run: the gradients that arrived and those it returned.
  void on_node(const Node& node, const TensorList& grads_in, const TensorList& grads_out);
  // Called by the engine when a backward starts: the roots' device.
  void on_start(const Device& device);

  const BackwardRecord& record() const { return record_; }
  BackwardRecord take() { return std::move(record_); }

 private:
  BackwardRecord record_;
  BackwardRecorder* previous_;
};

// Runs backward(roots, grad_roots) (leaves' .grad accumulate as usual) under a recorder, and returns what it
// recorded.
BackwardRecord record_backward(const TensorList& roots, const RecordOptions& options = {},
                               const TensorList& grad_roots = {});

}  // namespace minidet::autograd
