// The backward recorder (autograd/backward_record.h) and module scopes (autograd/scope.h): what the backward
// explorer shows must be what the engine did, node for node and number for number.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "autograd/backward_record.h"
#include "autograd/engine.h"
#include "autograd/scope.h"
#include "autograd/trace.h"
#include "core/factories.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/matmul/matmul.h"
#include "ops/reduction/reduction.h"
#include "tests/support.h"

using namespace minidet;
using autograd::BackwardRecord;
using autograd::RecordedNode;

namespace {

Tensor named_leaf(const Tensor& values, const std::string& name) {
  Tensor t = values;
  t.requires_grad_();
  autograd::set_name(t, name);
  return t;
}

const RecordedNode& node_named(const BackwardRecord& record, const std::string& op, const std::string& leaf = "") {
  for (const RecordedNode& n : record.nodes)
    if (n.op == op && n.leaf == leaf) return n;
  FAIL("no node " << op << " " << leaf);
  return record.nodes.front();
}

// loss = sum(relu(x @ w) * 2): a matmul, a relu, a mul by a scalar and a sum, with two named leaves.
struct SmallGraph {
  Tensor x, w, loss;
  explicit SmallGraph(const Device& device = Device::cpu()) {
    Generator g(3);
    x = named_leaf(randn({4, 3}, TensorOptions(kFloat64, device), &g), "x");
    w = named_leaf(randn({3, 5}, TensorOptions(kFloat64, device), &g), "w");
    autograd::ScopeRecordingGuard scopes;
    Tensor h;
    {
      autograd::ScopeGuard layer("layer1");
      autograd::ScopeGuard inner("linear");
      h = relu(matmul(x, w));
    }
    loss = sum(mul(h, full({}, 2.0, TensorOptions(kFloat64, device))));
    autograd::set_name(loss, "loss");
  }
};

}  // namespace

TEST_CASE("values/backward_record: nodes in execution order, with edges to recorded nodes and the sent gradients") {
  SmallGraph graph;
  const BackwardRecord record = autograd::record_backward({graph.loss});
  REQUIRE(record.nodes.size() >= 6);  // sum, mul, relu, mm (matmul), 2 AccumulateGrad
  std::set<int64_t> ids;
  for (size_t i = 0; i < record.nodes.size(); ++i) {
    CHECK(record.nodes[i].step == static_cast<int64_t>(i) + 1);
    ids.insert(record.nodes[i].id);
  }
  CHECK(ids.size() == record.nodes.size());
  // Every node runs after every node that sends it a gradient.
  for (const RecordedNode& n : record.nodes)
    for (const autograd::RecordedEdge& e : n.edges)
      if (e.to >= 0) {
        REQUIRE(record.find(e.to) != nullptr);
        CHECK(record.find(e.to)->step > n.step);
      }
  CHECK(record.nodes.front().op == "sum");
  CHECK(record.nodes.front().output_names == std::vector<std::string>{"loss"});
  CHECK(record.device == "cpu");

  // The leaves' records are their .grad, and the matmul sent exactly those gradients.
  const RecordedNode& w_sink = node_named(record, "AccumulateGrad", "w");
  REQUIRE(w_sink.leaf_grad.has_value());
  CHECK(w_sink.leaf_grad->values == graph.w.grad().to_vector<double>());
  const RecordedNode& matmul_node = node_named(record, "mm");
  REQUIRE(matmul_node.grads_out.size() == 2);
  REQUIRE(matmul_node.grads_out[1].has_value());
  CHECK(matmul_node.grads_out[1]->values == graph.w.grad().to_vector<double>());
  CHECK(matmul_node.inputs[0].sizes == Shape{4, 3});
  CHECK(matmul_node.outputs[0].sizes == Shape{4, 5});
  CHECK(matmul_node.outputs[0].dtype == "float64");
  // The source is the op's file, from the repository root.
  CHECK(matmul_node.source.rfind("ops/", 0) == 0);
  CHECK(matmul_node.source.find("matmul") != std::string::npos);
}

TEST_CASE("values/backward_record: scopes nest, stay off without a guard, and leaves take their parameter's") {
  SmallGraph graph;
  const BackwardRecord record = autograd::record_backward({graph.loss});
  CHECK(node_named(record, "mm").scope == "layer1.linear");
  CHECK(node_named(record, "relu").scope == "layer1.linear");
  CHECK(node_named(record, "sum").scope == "");

  // Without a ScopeRecordingGuard nothing is remembered, and a ScopeGuard changes nothing.
  CHECK_FALSE(autograd::scopes_recording());
  Tensor a = named_leaf(from_vector<double>({1.0, 2.0}), "net.a");
  Tensor out;
  {
    autograd::ScopeGuard scope("ignored");
    CHECK(autograd::current_scope().empty());
    out = sum(mul(a, a));
  }
  const BackwardRecord plain = autograd::record_backward({out});
  CHECK(node_named(plain, "sum").scope == "");
  // A named leaf's node sits with its parameter's module: "net.a" -> "net".
  CHECK(node_named(plain, "AccumulateGrad", "net.a").scope == "net");

  // replace = true sets the whole path; the guard restores the previous one.
  autograd::ScopeRecordingGuard scopes;
  {
    autograd::ScopeGuard outer("backbone");
    {
      autograd::ScopeGuard absolute("roi_heads.box_head", /*replace=*/true);
      CHECK(autograd::current_scope() == "roi_heads.box_head");
    }
    CHECK(autograd::current_scope() == "backbone");
  }
  CHECK(autograd::current_scope().empty());
}

TEST_CASE("values/backward_record: summaries give exact statistics, a histogram of every value and NaN/Inf counts") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor t = from_vector<double>({-2.0, 1.0, 3.0, nan, inf, 0.5}, {2, 3});
  autograd::RecordOptions options;
  options.histogram_bins = 5;
  const autograd::TensorSummary s = autograd::TensorSummary::of(t, options);
  CHECK(s.numel == 6);
  CHECK(s.nan_count == 1);
  CHECK(s.inf_count == 1);
  CHECK(s.min == -2.0);
  CHECK(s.max == 3.0);
  CHECK(s.max_abs == 3.0);
  CHECK(s.mean == doctest::Approx(2.5 / 4));
  CHECK(s.norm == doctest::Approx(std::sqrt(4.0 + 1.0 + 9.0 + 0.25)));
  REQUIRE(s.histogram.size() == 5);  // bins of width 1 over [-2, 3]: -2 | . | 0.5 | 1 | 3 (the top edge)
  CHECK(s.histogram == std::vector<int64_t>{1, 0, 1, 1, 1});
  CHECK(s.values.size() == 6);
  REQUIRE(s.heat_map.has_value());  // a matrix: its own values, NaN and Inf counted as 0
  CHECK(s.heat_map->rows == 2);
  CHECK(s.heat_map->cols == 3);
  CHECK(s.heat_map->values == std::vector<double>{-2.0, 1.0, 3.0, 0.0, 0.0, 0.5});

  // Above max_values: statistics only, and a heat map averaged over blocks.
  options.max_values = 10;
  options.preview_side = 4;
  const Tensor big = arange(2 * 8 * 6, TensorOptions(kFloat64)).reshape({2, 8, 6});
  const autograd::TensorSummary b = autograd::TensorSummary::of(big, options);
  CHECK(b.values.empty());
  CHECK(b.max == 95.0);
  REQUIRE(b.heat_map.has_value());
  CHECK(b.heat_map->rows == 4);  // 8 rows in blocks of 2
  CHECK(b.heat_map->cols == 3);  // 6 columns in blocks of 2
  // Cell (0, 0): mean over the two images of |x| at rows 0-1, columns 0-1: (0+1+6+7 + 48+49+54+55) / 8.
  CHECK(b.heat_map->values[0] == doctest::Approx((0 + 1 + 6 + 7 + 48 + 49 + 54 + 55) / 8.0));
  CHECK(b.heat_map->what.find("block mean 2x2") != std::string::npos);
}

TEST_CASE("values/backward_record: to_json and from_json round-trip every field") {
  SmallGraph graph;
  autograd::RecordOptions options;
  options.title = "a \"small\" graph";
  options.max_values = 12;  // the matmul's (4, 5) gradient keeps statistics only
  const BackwardRecord record = autograd::record_backward({graph.loss}, options);
  const BackwardRecord back = BackwardRecord::from_json(record.to_json());
  CHECK(back.options.title == options.title);
  CHECK(back.options.max_values == 12);
  REQUIRE(back.nodes.size() == record.nodes.size());
  for (size_t i = 0; i < record.nodes.size(); ++i) {
    const RecordedNode &a = record.nodes[i], &b = back.nodes[i];
    CHECK(a.id == b.id);
    CHECK(a.op == b.op);
    CHECK(a.scope == b.scope);
    CHECK(a.source == b.source);
    CHECK(a.leaf == b.leaf);
    CHECK(a.edges.size() == b.edges.size());
    REQUIRE(a.grads_out.size() == b.grads_out.size());
    for (size_t k = 0; k < a.grads_out.size(); ++k) {
      REQUIRE(a.grads_out[k].has_value() == b.grads_out[k].has_value());
      if (!a.grads_out[k]) continue;
      CHECK(a.grads_out[k]->norm == b.grads_out[k]->norm);  // statistics keep every digit
      CHECK(a.grads_out[k]->mean == b.grads_out[k]->mean);
      CHECK(a.grads_out[k]->histogram == b.grads_out[k]->histogram);
      CHECK(a.grads_out[k]->values.size() == b.grads_out[k]->values.size());
      for (size_t v = 0; v < a.grads_out[k]->values.size(); ++v)  // values keep float32's 7 digits
        CHECK(b.grads_out[k]->values[v] == doctest::Approx(a.grads_out[k]->values[v]).epsilon(1e-6));
    }
  }
}

TEST_CASE("errors/backward_record: a file that is not a version-1 record is refused by name") {
  CHECK_THROWS_CONTAINING(BackwardRecord::from_json("{not json"), "backward record: not valid JSON");
  CHECK_THROWS_CONTAINING(BackwardRecord::from_json("{\"format\":\"other\"}"), "expected a minidet backward record");
  CHECK_THROWS_CONTAINING(BackwardRecord::from_json("{\"format\":\"minidet-backward-record\",\"version\":2}"),
                          "version 2 is not supported");
  CHECK_THROWS_CONTAINING(BackwardRecord::from_json("{\"format\":\"minidet-backward-record\",\"version\":1}"),
                          "a field is missing");
  autograd::RecordOptions bad;
  bad.histogram_bins = 0;
  CHECK_THROWS_CONTAINING(autograd::BackwardRecorder{bad}, "histogram_bins and preview_side >= 1");
}

TEST_CASE("values/backward_record: off by default, innermost recorder wins, and a trace may run beside it") {
  CHECK(autograd::BackwardRecorder::active() == nullptr);
  SmallGraph graph;
  autograd::BackwardRecorder outer;
  {
    autograd::BackwardRecorder inner;
    CHECK(autograd::BackwardRecorder::active() == &inner);
    std::ostringstream trace;
    {
      autograd::BackwardTraceGuard tracing(trace);
      graph.loss.backward();
    }
    CHECK(inner.record().nodes.size() >= 6);
    // The trace printed the same nodes the recorder kept, one "[backward i]" block each.
    size_t blocks = 0;
    for (size_t at = trace.str().find("[backward "); at != std::string::npos; at = trace.str().find("[backward ", at + 1))
      ++blocks;
    CHECK(blocks == inner.record().nodes.size());
  }
  CHECK(autograd::BackwardRecorder::active() == &outer);
  CHECK(outer.record().nodes.empty());
}

MINIDET_CUDA_TEST_CASE("cuda/backward_record: a CUDA backward records the CPU's nodes and statistics") {
  SmallGraph cpu, gpu(Device::cuda());
  const BackwardRecord a = autograd::record_backward({cpu.loss}), b = autograd::record_backward({gpu.loss});
  CHECK(b.device == "cuda:0");
  REQUIRE(a.nodes.size() == b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    CHECK(a.nodes[i].op == b.nodes[i].op);
    CHECK(a.nodes[i].scope == b.nodes[i].scope);
    for (size_t k = 0; k < a.nodes[i].grads_out.size(); ++k) {
      REQUIRE(a.nodes[i].grads_out[k].has_value() == b.nodes[i].grads_out[k].has_value());
      if (a.nodes[i].grads_out[k])
        CHECK(b.nodes[i].grads_out[k]->norm == doctest::Approx(a.nodes[i].grads_out[k]->norm).epsilon(1e-12));
    }
  }
}
