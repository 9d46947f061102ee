// DetectorConfig's JSON form and checks. One function, visit_config, lists every key once; a Writer and a
// Reader walk it, so the reader, the writer and the key list in the header cannot drift apart.
#include "models/faster_rcnn/detector_config.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_checks.h"
#include "models/roi_heads/roi_inputs.h"

namespace minidet::models {

namespace {

using nlohmann::json;

const char* norm_json_name(NormKind kind) {
  return kind == NormKind::BatchNorm ? "batch_norm" : "frozen_batch_norm";
}

template <class V, class P>
void visit_proposals(V& v, P& p) {
  v.field("pre_nms_top_n", p.pre_nms_top_n);
  v.field("post_nms_top_n", p.post_nms_top_n);
  v.field("nms_threshold", p.nms_threshold);
  v.field("min_size", p.min_size);
  v.field("score_threshold", p.score_threshold);
}

// Every key of the JSON form, in the order to_json writes them. C is DetectorConfig or const DetectorConfig.
template <class V, class C>
void visit_config(V& v, C& c) {
  v.field("num_classes", c.num_classes);
  v.field("box_tolerance", c.box_tolerance);
  v.object("backbone", [&] {
    auto& b = c.backbone;
    v.field("in_channels", b.in_channels);
    v.field("stem_channels", b.stem_channels);
    v.field("widths", b.widths);
    v.field("blocks", b.blocks);
    v.field("strides", b.strides);
    v.field("norm", b.norm);
    v.field("deformable_last_stage", b.deformable_last_stage);
    v.field("modulated_deformable", b.modulated_deformable);
  });
  v.object("rpn", [&] {
    auto& r = c.rpn;
    v.field("anchor_sizes", r.anchor_sizes);
    v.field("aspect_ratios", r.aspect_ratios);
    v.field("fg_iou_threshold", r.loss.fg_iou_threshold);
    v.field("bg_iou_threshold", r.loss.bg_iou_threshold);
    v.field("batch_size_per_image", r.loss.batch_size_per_image);
    v.field("positive_fraction", r.loss.positive_fraction);
    v.field("smooth_l1_beta", r.loss.smooth_l1_beta);
    v.field("box_coder_weights", r.loss.box_coder_weights);
    v.object("train", [&] { visit_proposals(v, r.train_proposals); });
    v.object("test", [&] { visit_proposals(v, r.test_proposals); });
  });
  v.object("roi_heads", [&] {
    auto& h = c.roi_heads;
    v.field("pooled_size", h.pooled_size);
    v.field("sampling_ratio", h.sampling_ratio);
    v.field("aligned", h.aligned);
    v.field("representation_size", h.representation_size);
    v.field("fg_iou_threshold", h.fg_iou_threshold);
    v.field("bg_iou_threshold", h.bg_iou_threshold);
    v.field("batch_size_per_image", h.batch_size_per_image);
    v.field("positive_fraction", h.positive_fraction);
    v.field("box_coder_weights", h.box_coder_weights);
    v.field("smooth_l1_beta", h.smooth_l1_beta);
    v.field("score_threshold", h.score_threshold);
    v.field("nms_threshold", h.nms_threshold);
    v.field("min_size", h.min_size);
    v.field("detections_per_image", h.detections_per_image);
  });
}

class Writer {
 public:
  json root = json::object();

  template <class T>
  void field(const char* key, const T& value) { top()[key] = value; }
  void field(const char* key, const NormKind& value) { top()[key] = norm_json_name(value); }
  template <class Body>
  void object(const char* key, Body&& body) {
    path_.emplace_back(key);
    top() = json::object();
    body();
    path_.pop_back();
  }

 private:
  json& top() {
    json* j = &root;
    for (const std::string& key : path_) j = &(*j)[key];
    return *j;
  }
  std::vector<std::string> path_;
};

// Applies the keys present in a JSON object onto a config; refuses unknown keys and wrong types by name.
class Reader {
 public:
  explicit Reader(const json& root) {
    MINIDET_CHECK(root.is_object(), "DetectorConfig: expected a JSON object at the top, got ", root.type_name());
    frames_.push_back({&root, "", {}});
  }

  template <class T>
  void field(const char* key, T& value) {
    if (const json* j = find(key)) read(*j, dotted(key), value);
  }
  template <class Body>
  void object(const char* key, Body&& body) {
    const json* j = find(key);
    if (!j) return;
    MINIDET_CHECK(j->is_object(), "DetectorConfig: ", dotted(key), " must be an object, got ", j->type_name());
    frames_.push_back({j, dotted(key) + ".", {}});
    body();
    finish();
    frames_.pop_back();
  }
  // Every key of the current object must have been asked for.
  void finish() {
    const Frame& f = frames_.back();
    for (const auto& item : f.object->items()) {
      if (f.known.count(item.key())) continue;
      std::string known;
      for (const std::string& k : f.known) known += (known.empty() ? "" : ", ") + k;
      MINIDET_FAIL("DetectorConfig: unknown key '", f.prefix, item.key(), "' (known keys here: ", known, ")");
    }
  }

 private:
  struct Frame {
    const json* object;
    std::string prefix;
    std::set<std::string> known;
  };

  const json* find(const char* key) {
    Frame& f = frames_.back();
    f.known.insert(key);
    const auto it = f.object->find(key);
    return it == f.object->end() ? nullptr : &*it;
  }
  std::string dotted(const char* key) const { return frames_.back().prefix + key; }

  static void read(const json& j, const std::string& key, int64_t& out) {
    MINIDET_CHECK(j.is_number_integer(), "DetectorConfig: ", key, " must be an integer, got ", j.dump());
    out = j.get<int64_t>();
  }
  static void read(const json& j, const std::string& key, double& out) {
    MINIDET_CHECK(j.is_number(), "DetectorConfig: ", key, " must be a number, got ", j.dump());
    out = j.get<double>();
  }
  static void read(const json& j, const std::string& key, bool& out) {
    MINIDET_CHECK(j.is_boolean(), "DetectorConfig: ", key, " must be true or false, got ", j.dump());
    out = j.get<bool>();
  }
  static void read(const json& j, const std::string& key, NormKind& out) {
    const bool ok = j.is_string() && (j == "batch_norm" || j == "frozen_batch_norm");
    MINIDET_CHECK(ok, "DetectorConfig: ", key, " must be \"batch_norm\" or \"frozen_batch_norm\", got ", j.dump());
    out = j == "batch_norm" ? NormKind::BatchNorm : NormKind::FrozenBatchNorm;
  }
  template <class T>
  static void read(const json& j, const std::string& key, std::vector<T>& out) {
    MINIDET_CHECK(j.is_array(), "DetectorConfig: ", key, " must be a list, got ", j.dump());
    out.assign(j.size(), T{});
    for (size_t i = 0; i < j.size(); ++i) read(j[i], key + "[" + std::to_string(i) + "]", out[i]);
  }
  static void read(const json& j, const std::string& key, std::array<double, 4>& out) {
    MINIDET_CHECK(j.is_array() && j.size() == 4, "DetectorConfig: ", key, " must be a list of 4 numbers, got ",
                  j.dump());
    for (size_t i = 0; i < 4; ++i) read(j[i], key + "[" + std::to_string(i) + "]", out[i]);
  }

  std::vector<Frame> frames_;
};

json parse_json(const std::string& text, const std::string& what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // syntax errors, and numbers beyond double's range (1e999)
    MINIDET_FAIL("DetectorConfig: ", what, " is not valid JSON: ", e.what());
  }
}

void apply_json(const json& root, DetectorConfig& config) {
  Reader reader(root);
  visit_config(reader, config);
  reader.finish();
}

// Throws "DetectorConfig: <key> must be <what>, got <value>" unless ok.
template <class T>
void need(bool ok, const char* key, const char* what, const T& value) {
  MINIDET_CHECK(ok, "DetectorConfig: ", key, " must be ", what, ", got ", value);
}
bool unit(double x) { return x >= 0.0 && x <= 1.0; }  // false for NaN
bool positive(double x) { return std::isfinite(x) && x > 0.0; }

void validate_list(const char* key, const std::vector<double>& values) {
  need(!values.empty(), key, "a non-empty list (a detector without anchors cannot propose anything)", "[]");
  for (double v : values) need(positive(v), key, "positive and finite", v);
}

}  // namespace

void DetectorConfig::validate() const {
  need(num_classes >= 1, "num_classes", "at least 1", num_classes);
  need(std::isfinite(box_tolerance) && box_tolerance >= 0.0, "box_tolerance", ">= 0", box_tolerance);

  const BackboneOptions& b = backbone;
  need(b.in_channels > 0, "backbone.in_channels", "positive", b.in_channels);
  need(b.stem_channels > 0, "backbone.stem_channels", "positive", b.stem_channels);
  need(!b.widths.empty(), "backbone.widths", "a non-empty list (one width per stage)", "[]");
  need(b.blocks.size() == b.widths.size(), "backbone.blocks", "one entry per stage (as widths)", b.blocks.size());
  need(b.strides.size() == b.widths.size(), "backbone.strides", "one entry per stage (as widths)", b.strides.size());
  for (size_t i = 0; i < b.widths.size(); ++i) {
    need(b.widths[i] > 0, "backbone.widths", "positive", b.widths[i]);
    need(b.blocks[i] > 0, "backbone.blocks", "positive", b.blocks[i]);
    need(b.strides[i] == 1 || b.strides[i] == 2, "backbone.strides", "1 or 2", b.strides[i]);
  }

  validate_list("rpn.anchor_sizes", rpn.anchor_sizes);
  validate_list("rpn.aspect_ratios", rpn.aspect_ratios);
  const RPNLossOptions& l = rpn.loss;
  need(unit(l.fg_iou_threshold), "rpn.fg_iou_threshold", "in [0, 1]", l.fg_iou_threshold);
  need(unit(l.bg_iou_threshold) && l.bg_iou_threshold <= l.fg_iou_threshold, "rpn.bg_iou_threshold",
       "in [0, rpn.fg_iou_threshold]", l.bg_iou_threshold);
  need(l.batch_size_per_image >= 1, "rpn.batch_size_per_image", "at least 1", l.batch_size_per_image);
  need(unit(l.positive_fraction), "rpn.positive_fraction", "in [0, 1]", l.positive_fraction);
  need(positive(l.smooth_l1_beta), "rpn.smooth_l1_beta", "positive", l.smooth_l1_beta);
  for (double w : l.box_coder_weights) need(positive(w), "rpn.box_coder_weights", "positive", w);
  check_proposal_options("DetectorConfig: rpn.train", rpn.train_proposals);
  check_proposal_options("DetectorConfig: rpn.test", rpn.test_proposals);

  const RoIHeadsOptions& h = roi_heads;
  need(unit(h.fg_iou_threshold), "roi_heads.fg_iou_threshold", "in [0, 1]", h.fg_iou_threshold);
  need(unit(h.bg_iou_threshold) && h.bg_iou_threshold <= h.fg_iou_threshold, "roi_heads.bg_iou_threshold",
       "in [0, roi_heads.fg_iou_threshold]", h.bg_iou_threshold);
  need(unit(h.nms_threshold), "roi_heads.nms_threshold", "in [0, 1]", h.nms_threshold);
  for (double w : h.box_coder_weights) need(positive(w), "roi_heads.box_coder_weights", "positive", w);
  detail::check_options("DetectorConfig: roi_heads", resolved().roi_heads);
}

DetectorConfig DetectorConfig::resolved() const {
  DetectorConfig c = *this;
  int64_t stride = 2;
  for (int64_t s : c.backbone.strides) stride *= s;
  const int64_t channels = c.backbone.widths.empty() ? 0 : c.backbone.widths.back();
  c.rpn.in_channels = c.roi_heads.in_channels = channels;
  c.rpn.feature_stride = c.roi_heads.feature_stride = stride;
  c.roi_heads.num_classes = c.num_classes;
  return c;
}

std::string DetectorConfig::to_json(int indent) const {
  Writer writer;
  visit_config(writer, *this);
  return writer.root.dump(indent);
}

DetectorConfig DetectorConfig::from_json(const std::string& text) {
  DetectorConfig config;
  apply_json(parse_json(text, "the text"), config);
  return config;
}

void DetectorConfig::set(const std::string& assignment) {
  const size_t eq = assignment.find('=');
  MINIDET_CHECK(eq != std::string::npos && eq > 0, "DetectorConfig: expected key=value, got '", assignment, "'");
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  json value;
  try {
    value = json::parse(text);
  } catch (const json::exception&) {
    value = text;  // a bare word: a string (frozen_batch_norm); 1e999 too, then refused by type
  }
  // "a.b.c" -> {"a": {"b": {"c": value}}}, then applied like a file.
  json root = std::move(value);
  size_t end = key.size();
  while (true) {
    const size_t dot = key.rfind('.', end - 1);
    const size_t begin = dot == std::string::npos ? 0 : dot + 1;
    MINIDET_CHECK(begin < end, "DetectorConfig: empty part in key '", key, "'");
    root = json{{key.substr(begin, end - begin), std::move(root)}};
    if (dot == std::string::npos) break;
    end = dot;
  }
  apply_json(root, *this);
}

DetectorConfig DetectorConfig::load(const std::string& path) {
  check_not_a_directory("DetectorConfig", path);
  std::ifstream in(path);
  MINIDET_CHECK(in.good(), "DetectorConfig: cannot open '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  DetectorConfig config;
  apply_json(parse_json(text.str(), "'" + path + "'"), config);
  return config;
}

void DetectorConfig::save(const std::string& path) const {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp);
    MINIDET_CHECK(out.good(), "DetectorConfig: cannot write '", temp, "'");
    out << to_json() << "\n";
    MINIDET_CHECK(out.good(), "DetectorConfig: writing '", temp, "' failed");
  }
  MINIDET_CHECK(std::rename(temp.c_str(), path.c_str()) == 0, "DetectorConfig: cannot rename '", temp, "' to '",
                path, "'");
}

}  // namespace minidet::models
