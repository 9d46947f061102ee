// DetectorConfig: every number of the tiny Faster R-CNN in one struct, with defaults for 128 px images of
// the synthetic shapes (3 classes), and its JSON form.
//
// The struct holds the blocks' own option structs, so a field means exactly what the block's header says:
//   backbone   BackboneOptions   (models/backbone/backbone.h)    widths 32-64-128-128, stride 8, deformable
//   rpn        RPNOptions        (models/rpn/rpn.h)              anchors {16,32,64} x {0.5,1,2}, 256 at 0.5
//   roi_heads  RoIHeadsOptions   (models/roi_heads/roi_heads.h)  RoIAlign 7x7, 128 RoIs at 0.25, NMS 0.5
// Fields that follow from others are not in the JSON and are filled in by resolved(): the RPN's and the RoI
// heads' in_channels and feature_stride (from the backbone), roi_heads.num_classes (from num_classes), and
// the RPN's and RoI heads' box_type (from box_type). The angle keys matter only for rotated boxes.
//
// JSON: one object with the keys below, every key optional (a missing key keeps its default). A key the
// config does not know is refused by its dotted name ("unknown key 'rpn.anchor_size'"), and so is a value of
// the wrong type, so a typo never silently trains the default. visit_keys lists the keys once for the shared
// reader, writer and --set of core/config_visitor.h:
//   { "num_classes": 3, "box_tolerance": 0.5, "box_type": "axis_aligned" | "rotated",
//     "rotated_offsets": "image" | "box", "rotated_edge_swap": false,
//     "backbone":  { "in_channels", "stem_channels", "widths", "blocks", "strides",
//                    "norm": "batch_norm" | "sync_batch_norm" | "frozen_batch_norm", "deformable_last_stage",
//                    "modulated_deformable" },
//     "rpn":       { "anchor_sizes", "aspect_ratios", "anchor_angles_degrees", "fg_iou_threshold",
//                    "bg_iou_threshold", "batch_size_per_image", "positive_fraction", "smooth_l1_beta",
//                    "box_coder_weights", "box_coder_angle_weight", "match_bounding_boxes",
//                    "train": { "pre_nms_top_n", "post_nms_top_n", "nms_threshold", "min_size", "score_threshold" },
//                    "test":  { same keys } },
//     "roi_heads": { "pooled_size", "sampling_ratio", "aligned", "representation_size", "fg_iou_threshold",
//                    "bg_iou_threshold", "batch_size_per_image", "positive_fraction", "box_coder_weights",
//                    "box_coder_angle_weight", "smooth_l1_beta", "score_threshold", "nms_threshold", "min_size",
//                    "detections_per_image" } }
// to_json() writes every key (in alphabetical order), so a run folder's config.json shows the whole model.
#pragma once

#include <string>

#include "core/config_visitor.h"
#include "models/backbone/backbone.h"
#include "models/roi_heads/roi_heads.h"
#include "models/rpn/rpn.h"

namespace minidet::models {

struct DetectorConfig {
  int64_t num_classes = 3;      // C object classes, labels 1..C (0 is background)
  double box_tolerance = 0.5;   // how far (pixels) a ground-truth box may reach outside its image
  BoxType box_type = BoxType::kAxisAligned;  // rotated: the RRPN-style detector (faster_rcnn.h)
  // Rotated boxes: the axes the centre offsets are measured along, the image's ("image", RRPN and
  // detectron2) or the box's own ("box", RoI Transformer and Oriented R-CNN); models/box_coder/rotated_box_coder.h.
  // On the rotated shapes the two learn alike (docs/rotated.md), so the default is RRPN's.
  OffsetFrame rotated_offsets = OffsetFrame::kImage;
  // Rotated boxes: regression targets describe each object in whichever of its two equivalent forms (sides
  // swapped and a quarter turn) turns less from its anchor or proposal (rotated_box_coder.h's edge swap).
  bool rotated_edge_swap = false;
  BackboneOptions backbone;
  RPNOptions rpn;
  RoIHeadsOptions roi_heads;

  // Throws naming the first bad key and its value (e.g. "DetectorConfig: rpn.positive_fraction must be in
  // [0, 1], got 1.5").
  void validate() const;
  // A copy with the derived fields filled in (see above); what FasterRCNN builds from.
  DetectorConfig resolved() const;

  std::string to_json(int indent = 2) const;
  // Starts from the defaults and applies every key of the text; throws on bad JSON, an unknown key or a
  // wrong type, naming the key. Does not call validate().
  static DetectorConfig from_json(const std::string& text);
  // Applies one override, "rpn.train.post_nms_top_n=500" style: the dotted key and a JSON value (a bare word
  // is read as a string, so norm=frozen_batch_norm works). Unknown keys are refused by name.
  void set(const std::string& assignment);

  // Calls v once for every key of the JSON form: the one list that to_json, from_json, load and set walk,
  // and that the minidet program's RunConfig nests under "detector".
  void visit_keys(ConfigVisitor& v);

  static DetectorConfig load(const std::string& path);
  void save(const std::string& path) const;  // written to path + ".tmp", then renamed
};

}  // namespace minidet::models
