// DetectorConfig's JSON form and checks. visit_keys lists every key once; the shared walkers of
// core/config_visitor.h write, read and override through it, so the reader, the writer and the key list in
// the header cannot drift apart.
#include "models/faster_rcnn/detector_config.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/config_visitor.h"
#include "core/error.h"
#include "models/roi_heads/roi_inputs.h"

namespace minidet::models {

namespace {

// The name that opens every message about a DetectorConfig.
constexpr const char* kWhat = "DetectorConfig";

void visit_proposals(ConfigVisitor& v, ProposalOptions& p) {
  v.field("min_size", p.min_size);
  v.field("nms_threshold", p.nms_threshold);
  v.field("post_nms_top_n", p.post_nms_top_n);
  v.field("pre_nms_top_n", p.pre_nms_top_n);
  v.field("score_threshold", p.score_threshold);
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
  need(positive(l.box_coder_angle_weight), "rpn.box_coder_angle_weight", "positive", l.box_coder_angle_weight);
  if (box_type == BoxType::kRotated) {
    need(!rpn.anchor_angles_degrees.empty(), "rpn.anchor_angles_degrees",
         "a non-empty list for rotated boxes (a rotated detector needs anchors at some angle)", "[]");
    for (double a : rpn.anchor_angles_degrees) need(std::isfinite(a), "rpn.anchor_angles_degrees", "finite", a);
  }
  check_proposal_options("DetectorConfig: rpn.train", rpn.train_proposals);
  check_proposal_options("DetectorConfig: rpn.test", rpn.test_proposals);

  const RoIHeadsOptions& h = roi_heads;
  need(unit(h.fg_iou_threshold), "roi_heads.fg_iou_threshold", "in [0, 1]", h.fg_iou_threshold);
  need(unit(h.bg_iou_threshold) && h.bg_iou_threshold <= h.fg_iou_threshold, "roi_heads.bg_iou_threshold",
       "in [0, roi_heads.fg_iou_threshold]", h.bg_iou_threshold);
  need(unit(h.nms_threshold), "roi_heads.nms_threshold", "in [0, 1]", h.nms_threshold);
  for (double w : h.box_coder_weights) need(positive(w), "roi_heads.box_coder_weights", "positive", w);
  need(positive(h.box_coder_angle_weight), "roi_heads.box_coder_angle_weight", "positive", h.box_coder_angle_weight);
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
  c.rpn.box_type = c.roi_heads.box_type = c.box_type;
  c.rpn.loss.rotated_offsets = c.rpn.train_proposals.rotated_offsets = c.rpn.test_proposals.rotated_offsets =
      c.roi_heads.rotated_offsets = c.rotated_offsets;
  c.rpn.loss.rotated_edge_swap = c.roi_heads.rotated_edge_swap = c.rotated_edge_swap;  // encode only
  return c;
}

// Keys in alphabetical order, at every level: the order in which config.json files and checkpoints have
// always held them, so that what a run writes stays byte for byte what runs wrote before.
void DetectorConfig::visit_keys(ConfigVisitor& v) {
  v.object("backbone", [&] {
    BackboneOptions& b = backbone;
    v.field("blocks", b.blocks);
    v.field("deformable_last_stage", b.deformable_last_stage);
    v.field("in_channels", b.in_channels);
    v.field("modulated_deformable", b.modulated_deformable);
    v.choice("norm", b.norm, {{"batch_norm", NormKind::BatchNorm},
                                    {"sync_batch_norm", NormKind::SyncBatchNorm},
                                    {"frozen_batch_norm", NormKind::FrozenBatchNorm}});
    v.field("stem_channels", b.stem_channels);
    v.field("strides", b.strides);
    v.field("widths", b.widths);
  });
  v.field("box_tolerance", box_tolerance);
  v.choice("box_type", box_type, {{"axis_aligned", BoxType::kAxisAligned}, {"rotated", BoxType::kRotated}});
  v.field("num_classes", num_classes);
  v.object("roi_heads", [&] {
    RoIHeadsOptions& h = roi_heads;
    v.field("aligned", h.aligned);
    v.field("batch_size_per_image", h.batch_size_per_image);
    v.field("bg_iou_threshold", h.bg_iou_threshold);
    v.field("box_coder_angle_weight", h.box_coder_angle_weight);
    v.field("box_coder_weights", h.box_coder_weights);
    v.field("detections_per_image", h.detections_per_image);
    v.field("fg_iou_threshold", h.fg_iou_threshold);
    v.field("min_size", h.min_size);
    v.field("nms_threshold", h.nms_threshold);
    v.field("pooled_size", h.pooled_size);
    v.field("positive_fraction", h.positive_fraction);
    v.field("representation_size", h.representation_size);
    v.field("sampling_ratio", h.sampling_ratio);
    v.field("score_threshold", h.score_threshold);
    v.field("smooth_l1_beta", h.smooth_l1_beta);
  });
  v.field("rotated_edge_swap", rotated_edge_swap);
  v.choice("rotated_offsets", rotated_offsets, {{"box", OffsetFrame::kBox}, {"image", OffsetFrame::kImage}});
  v.object("rpn", [&] {
    RPNOptions& r = rpn;
    v.field("anchor_angles_degrees", r.anchor_angles_degrees);
    v.field("anchor_sizes", r.anchor_sizes);
    v.field("aspect_ratios", r.aspect_ratios);
    v.field("batch_size_per_image", r.loss.batch_size_per_image);
    v.field("bg_iou_threshold", r.loss.bg_iou_threshold);
    v.field("box_coder_angle_weight", r.loss.box_coder_angle_weight);
    v.field("box_coder_weights", r.loss.box_coder_weights);
    v.field("fg_iou_threshold", r.loss.fg_iou_threshold);
    v.field("match_bounding_boxes", r.loss.match_bounding_boxes);
    v.field("positive_fraction", r.loss.positive_fraction);
    v.field("smooth_l1_beta", r.loss.smooth_l1_beta);
    v.object("test", [&] { visit_proposals(v, r.test_proposals); });
    v.object("train", [&] { visit_proposals(v, r.train_proposals); });
  });
}

std::string DetectorConfig::to_json(int indent) const {
  DetectorConfig fields = *this;  // visit_keys takes the fields by reference, for the reader; the writer only reads
  return write_config_json([&](ConfigVisitor& v) { fields.visit_keys(v); }, indent);
}

DetectorConfig DetectorConfig::from_json(const std::string& text) {
  DetectorConfig config;
  read_config_json(text, kWhat, "the text", [&](ConfigVisitor& v) { config.visit_keys(v); });
  return config;
}

void DetectorConfig::set(const std::string& assignment) {
  set_config_value(assignment, kWhat, [&](ConfigVisitor& v) { visit_keys(v); });
}

DetectorConfig DetectorConfig::load(const std::string& path) {
  DetectorConfig config;
  read_config_file(path, kWhat, [&](ConfigVisitor& v) { config.visit_keys(v); });
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
