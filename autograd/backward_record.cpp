#include "autograd/backward_record.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "autograd/engine.h"
#include "autograd/json_text.h"

namespace minidet::autograd {
namespace {

thread_local BackwardRecorder* t_recorder = nullptr;

// The file from the repository root: __builtin_FILE gives the path the compiler was handed (absolute, under
// CMake), which would make the page depend on where the repository was checked out.
std::string from_repository_root(const char* file) {
  if (file == nullptr) return "";
  std::string path(file);
#ifdef MINIDET_SOURCE_ROOT
  const std::string root = MINIDET_SOURCE_ROOT;
  if (path.compare(0, root.size(), root) == 0) path.erase(0, root.size());
#endif
  return path;
}

// The heat map of `values` (row-major, `sizes`): the last two dimensions, with the leading ones reduced
// (signed values for a matrix; mean |x| over the leading dimensions otherwise, where signs would cancel),
// then averaged over blocks so that neither side passes `side`.
HeatMap heat_map_of(const std::vector<double>& values, const Shape& sizes, int64_t side) {
  const int64_t rows = sizes[sizes.size() - 2], cols = sizes.back();
  const int64_t planes = rows * cols == 0 ? 0 : static_cast<int64_t>(values.size()) / (rows * cols);
  const bool matrix = sizes.size() == 2;
  std::vector<double> plane(static_cast<size_t>(rows * cols), 0.0);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < rows * cols; ++i) {
      const double v = values[static_cast<size_t>(p * rows * cols + i)];
      if (std::isfinite(v)) plane[static_cast<size_t>(i)] += matrix ? v : std::fabs(v) / static_cast<double>(planes);
    }
  HeatMap map;
  map.what = matrix ? "" : "mean |x| over dims 0-" + std::to_string(sizes.size() - 3);
  const int64_t block_r = std::max<int64_t>(1, (rows + side - 1) / side);
  const int64_t block_c = std::max<int64_t>(1, (cols + side - 1) / side);
  map.rows = (rows + block_r - 1) / block_r;
  map.cols = (cols + block_c - 1) / block_c;
  if (block_r > 1 || block_c > 1)
    map.what += (map.what.empty() ? "" : ", ") + std::string("block mean ") + std::to_string(block_r) + "x" +
                std::to_string(block_c);
  if (map.what.empty()) map.what = "values";
  map.values.assign(static_cast<size_t>(map.rows * map.cols), 0.0);
  std::vector<int64_t> counts(map.values.size(), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const size_t cell = static_cast<size_t>((r / block_r) * map.cols + c / block_c);
      map.values[cell] += plane[static_cast<size_t>(r * cols + c)];
      counts[cell]++;
    }
  for (size_t i = 0; i < map.values.size(); ++i)
    if (counts[i] > 0) map.values[i] /= static_cast<double>(counts[i]);
  return map;
}

std::vector<RecordedTensorMeta> metas_of(const std::vector<TensorMeta>& metas) {
  std::vector<RecordedTensorMeta> out;
  for (const TensorMeta& m : metas) out.push_back({m.sizes, dtype_name(m.dtype)});
  return out;
}

// ---- JSON: written by hand so that statistics keep every digit (%.17g) while the bulky arrays keep what they
// are for, float32's 7 digits for values and 4 for heat maps (they only pick colours), which keeps a detector
// step's page small; read back with nlohmann-json.

void put_number(std::string& out, double v, const char* format) {
  if (!std::isfinite(v)) {  // JSON has no NaN or Inf; the counts say how many there were
    out += "null";
    return;
  }
  if (v == 0) {  // -0 as 0: a reader of the JSON (nlohmann's among them) may not keep the sign of a zero
    out += '0';
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, format, v);
  out += buf;
}

void put_string(std::string& out, const std::string& s) { out += json_quoted(s); }

template <typename T, typename Put>
void put_array(std::string& out, const std::vector<T>& items, Put put) {
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    put(items[i]);
  }
  out += ']';
}

void put_shape(std::string& out, const Shape& sizes) {
  put_array(out, sizes, [&](int64_t v) { out += std::to_string(v); });
}

void put_summary(std::string& out, const std::optional<TensorSummary>& s) {
  if (!s) {
    out += "null";
    return;
  }
  const auto exact = [&](const char* key, double v) {
    out += ",\"";
    out += key;
    out += "\":";
    put_number(out, v, "%.17g");
  };
  out += "{\"shape\":";
  put_shape(out, s->sizes);
  out += ",\"dtype\":";
  put_string(out, s->dtype);
  out += ",\"numel\":" + std::to_string(s->numel);
  exact("norm", s->norm), exact("mean", s->mean), exact("min", s->min), exact("max", s->max);
  exact("max_abs", s->max_abs);
  out += ",\"nan\":" + std::to_string(s->nan_count) + ",\"inf\":" + std::to_string(s->inf_count);
  exact("hist_low", s->histogram_low), exact("hist_high", s->histogram_high);
  out += ",\"hist\":";
  put_array(out, s->histogram, [&](int64_t v) { out += std::to_string(v); });
  const auto put_value = [&](double v) { put_number(out, v, "%.7g"); };
  if (!s->values.empty() || s->numel == 0) {
    out += ",\"values\":";
    put_array(out, s->values, put_value);
  }
  if (s->heat_map) {
    out += ",\"heat_map\":{\"rows\":" + std::to_string(s->heat_map->rows) +
           ",\"cols\":" + std::to_string(s->heat_map->cols) + ",\"values\":";
    put_array(out, s->heat_map->values, [&](double v) { put_number(out, v, "%.4g"); });  // colours only
    out += ",\"what\":";
    put_string(out, s->heat_map->what);
    out += '}';
  }
  out += '}';
}

void put_metas(std::string& out, const std::vector<RecordedTensorMeta>& metas) {
  put_array(out, metas, [&](const RecordedTensorMeta& m) {
    out += "{\"shape\":";
    put_shape(out, m.sizes);
    out += ",\"dtype\":";
    put_string(out, m.dtype);
    out += '}';
  });
}

using json = nlohmann::json;

double number_of(const json& j) { return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>(); }

std::optional<TensorSummary> summary_of(const json& j) {
  if (j.is_null()) return std::nullopt;
  TensorSummary s;
  s.sizes = j.at("shape").get<Shape>();
  s.dtype = j.at("dtype").get<std::string>();
  s.numel = j.at("numel").get<int64_t>();
  s.norm = number_of(j.at("norm")), s.mean = number_of(j.at("mean"));
  s.min = number_of(j.at("min")), s.max = number_of(j.at("max")), s.max_abs = number_of(j.at("max_abs"));
  s.nan_count = j.at("nan").get<int64_t>(), s.inf_count = j.at("inf").get<int64_t>();
  s.histogram_low = number_of(j.at("hist_low")), s.histogram_high = number_of(j.at("hist_high"));
  s.histogram = j.at("hist").get<std::vector<int64_t>>();
  if (j.contains("values"))
    for (const json& v : j.at("values")) s.values.push_back(number_of(v));
  if (j.contains("heat_map")) {
    const json& h = j.at("heat_map");
    HeatMap map;
    map.rows = h.at("rows").get<int64_t>(), map.cols = h.at("cols").get<int64_t>();
    for (const json& v : h.at("values")) map.values.push_back(number_of(v));
    map.what = h.at("what").get<std::string>();
    s.heat_map = std::move(map);
  }
  return s;
}

std::vector<RecordedTensorMeta> metas_of(const json& j) {
  std::vector<RecordedTensorMeta> out;
  for (const json& m : j) out.push_back({m.at("shape").get<Shape>(), m.at("dtype").get<std::string>()});
  return out;
}

}  // namespace

TensorSummary TensorSummary::of(const Tensor& tensor, const RecordOptions& options) {
  TensorSummary s;
  s.sizes = tensor.sizes();
  s.dtype = dtype_name(tensor.dtype());
  s.numel = tensor.numel();
  const std::vector<double> values = tensor.to_vector<double>();  // on the host, whatever the device
  double sum = 0, sum_squares = 0;
  int64_t finite = 0;
  s.min = std::numeric_limits<double>::infinity();
  s.max = -s.min;
  for (double v : values) {
    if (std::isnan(v)) ++s.nan_count;
    else if (std::isinf(v)) ++s.inf_count;
    if (!std::isfinite(v)) continue;
    ++finite;
    sum += v, sum_squares += v * v;
    s.min = std::min(s.min, v), s.max = std::max(s.max, v);
  }
  if (finite == 0) s.min = s.max = 0;
  s.norm = std::sqrt(sum_squares);
  s.mean = finite ? sum / static_cast<double>(finite) : 0;
  s.max_abs = std::max(std::fabs(s.min), std::fabs(s.max));
  s.histogram_low = s.min, s.histogram_high = s.max;
  s.histogram.assign(static_cast<size_t>(std::max(1, options.histogram_bins)), 0);
  const double width = (s.max - s.min) / static_cast<double>(s.histogram.size());
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    size_t bin = width > 0 ? static_cast<size_t>((v - s.min) / width) : 0;
    s.histogram[std::min(bin, s.histogram.size() - 1)]++;
  }
  if (s.numel <= options.max_values) s.values = values;
  if (s.sizes.size() >= 2 && s.numel > 0) s.heat_map = heat_map_of(values, s.sizes, std::max<int64_t>(1, options.preview_side));
  return s;
}

const RecordedNode* BackwardRecord::find(int64_t id) const {
  for (const RecordedNode& node : nodes)
    if (node.id == id) return &node;
  return nullptr;
}

std::string BackwardRecord::to_json() const {
  std::string out = "{\"format\":\"minidet-backward-record\",\"version\":1,\"title\":";
  put_string(out, options.title);
  out += ",\"device\":";
  put_string(out, device);
  out += ",\"options\":{\"max_values\":" + std::to_string(options.max_values) +
         ",\"histogram_bins\":" + std::to_string(options.histogram_bins) +
         ",\"preview_side\":" + std::to_string(options.preview_side) + "},\"nodes\":[\n";
  for (size_t n = 0; n < nodes.size(); ++n) {
    const RecordedNode& node = nodes[n];
    if (n) out += ",\n";
    out += "{\"id\":" + std::to_string(node.id) + ",\"step\":" + std::to_string(node.step) + ",\"op\":";
    put_string(out, node.op);
    out += ",\"scope\":";
    put_string(out, node.scope);
    out += ",\"source\":";
    put_string(out, node.source);
    out += ",\"leaf\":";
    put_string(out, node.leaf);
    out += ",\"output_names\":";
    put_array(out, node.output_names, [&](const std::string& s) { put_string(out, s); });
    out += ",\"inputs\":";
    put_metas(out, node.inputs);
    out += ",\"outputs\":";
    put_metas(out, node.outputs);
    out += ",\"edges\":";
    put_array(out, node.edges, [&](const RecordedEdge& e) {
      out += "{\"to\":" + std::to_string(e.to) + ",\"slot\":" + std::to_string(e.slot) + "}";
    });
    const auto put = [&](const std::optional<TensorSummary>& s) { put_summary(out, s); };
    out += ",\"grads_in\":";
    put_array(out, node.grads_in, put);
    out += ",\"grads_out\":";
    put_array(out, node.grads_out, put);
    out += ",\"leaf_grad\":";
    put_summary(out, node.leaf_grad);
    out += '}';
  }
  out += "\n]}\n";
  return out;
}

BackwardRecord BackwardRecord::from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    MINIDET_FAIL("backward record: not valid JSON (", e.what(), ")");
  }
  MINIDET_CHECK(j.is_object() && j.value("format", "") == "minidet-backward-record",
                "backward record: expected a minidet backward record (\"format\": \"minidet-backward-record\")");
  MINIDET_CHECK(j.value("version", 0) == 1, "backward record: version ", j.value("version", 0),
                " is not supported; this build reads version 1");
  BackwardRecord record;
  try {
    record.options.title = j.at("title").get<std::string>();
    record.device = j.at("device").get<std::string>();
    const json& o = j.at("options");
    record.options.max_values = o.at("max_values").get<int64_t>();
    record.options.histogram_bins = o.at("histogram_bins").get<int>();
    record.options.preview_side = o.at("preview_side").get<int64_t>();
    for (const json& n : j.at("nodes")) {
      RecordedNode node;
      node.id = n.at("id").get<int64_t>(), node.step = n.at("step").get<int64_t>();
      node.op = n.at("op").get<std::string>(), node.scope = n.at("scope").get<std::string>();
      node.source = n.at("source").get<std::string>(), node.leaf = n.at("leaf").get<std::string>();
      node.output_names = n.at("output_names").get<std::vector<std::string>>();
      node.inputs = metas_of(n.at("inputs")), node.outputs = metas_of(n.at("outputs"));
      for (const json& e : n.at("edges")) node.edges.push_back({e.at("to").get<int64_t>(), e.at("slot").get<uint32_t>()});
      for (const json& s : n.at("grads_in")) node.grads_in.push_back(summary_of(s));
      for (const json& s : n.at("grads_out")) node.grads_out.push_back(summary_of(s));
      node.leaf_grad = summary_of(n.at("leaf_grad"));
      record.nodes.push_back(std::move(node));
    }
  } catch (const json::exception& e) {
    MINIDET_FAIL("backward record: a field is missing or has the wrong type (", e.what(), ")");
  }
  for (size_t i = 0; i < record.nodes.size(); ++i)
    MINIDET_CHECK(record.nodes[i].step == static_cast<int64_t>(i) + 1, "backward record: node ", i,
                  " has step ", record.nodes[i].step, "; nodes must be listed in execution order from step 1");
  return record;
}

BackwardRecorder::BackwardRecorder(RecordOptions options) : previous_(t_recorder) {
  MINIDET_CHECK(options.max_values >= 0 && options.histogram_bins >= 1 && options.preview_side >= 1,
                "BackwardRecorder: max_values must be >= 0, histogram_bins and preview_side >= 1; got ",
                options.max_values, ", ", options.histogram_bins, ", ", options.preview_side);
  record_.options = std::move(options);
  t_recorder = this;
}

BackwardRecorder::~BackwardRecorder() { t_recorder = previous_; }

BackwardRecorder* BackwardRecorder::active() { return t_recorder; }

void BackwardRecorder::on_start(const Device& device) {
  if (record_.device.empty()) record_.device = device.str();
}

void BackwardRecorder::on_node(const Node& node, const TensorList& grads_in, const TensorList& grads_out) {
  RecordedNode r;
  r.id = static_cast<int64_t>(node.sequence_nr());
  r.step = static_cast<int64_t>(record_.nodes.size()) + 1;
  r.op = node.name();
  r.scope = node.scope;
  r.source = from_repository_root(node.source);
  r.output_names = node.output_names;
  r.inputs = metas_of(node.input_meta);
  r.outputs = metas_of(node.output_meta);
  for (const Edge& edge : node.next_edges)
    r.edges.push_back(edge.valid() ? RecordedEdge{static_cast<int64_t>(edge.node->sequence_nr()), edge.input_nr}
                                   : RecordedEdge{});
  const auto summarize = [&](const Tensor& t) -> std::optional<TensorSummary> {
    if (!t.defined()) return std::nullopt;
    return TensorSummary::of(t, record_.options);
  };
  for (const Tensor& g : grads_in) r.grads_in.push_back(summarize(g));
  for (size_t i = 0; i < node.next_edges.size(); ++i)
    r.grads_out.push_back(i < grads_out.size() && node.next_edges[i].valid() ? summarize(grads_out[i]) : std::nullopt);
  if (const auto* sink = dynamic_cast<const AccumulateGrad*>(&node)) {
    const AutogradMeta* meta = sink->leaf().autograd_meta_if_exists();
    if (meta) {
      r.leaf = meta->name;
      r.leaf_grad = summarize(meta->grad);
    }
    // A leaf's node was made when the leaf was first used, often outside any module: its parameter's
    // module is the truer scope, and the name says it ("backbone.stem.conv.weight" -> "backbone.stem.conv").
    if (r.scope.empty() && !r.leaf.empty()) {
      const size_t dot = r.leaf.rfind('.');
      r.scope = dot == std::string::npos ? "" : r.leaf.substr(0, dot);
    }
  }
  record_.nodes.push_back(std::move(r));
}

BackwardRecord record_backward(const TensorList& roots, const RecordOptions& options, const TensorList& grad_roots) {
  BackwardRecorder recorder(options);
  backward(roots, grad_roots);
  return recorder.take();
}

}  // namespace minidet::autograd
