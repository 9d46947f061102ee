// DetectorConfig: defaults and resolved fields, the JSON round trip, overrides, and every kind of bad input
// refused by the name of its key.
#include <cstdio>
#include <fstream>
#include <string>

#include "models/faster_rcnn/detector_config.h"
#include "tests/data/temp_dir.h"
#include "tests/support.h"

using minidet::models::DetectorConfig;
using minidet::models::NormKind;

TEST_CASE("values/detector_config: defaults are the tiny 128 px detector and resolve the derived fields") {
  const DetectorConfig config;
  CHECK_NOTHROW(config.validate());
  CHECK(config.num_classes == 3);
  CHECK(config.rpn.anchor_sizes == std::vector<double>{16, 32, 64});
  CHECK(config.roi_heads.pooled_size == 7);
  const DetectorConfig r = config.resolved();
  CHECK(r.rpn.in_channels == 128);
  CHECK(r.roi_heads.in_channels == 128);
  CHECK(r.rpn.feature_stride == 8);
  CHECK(r.roi_heads.feature_stride == 8);
  CHECK(r.roi_heads.num_classes == 3);
}

TEST_CASE("values/detector_config: the default JSON text lists every key alphabetically, as run folders hold it") {
  // The exact text, so a reordered or renamed key shows here before it changes the bytes of config.json.
  CHECK(DetectorConfig().to_json(-1) ==
        R"({"backbone":{"blocks":[1,1,1,1],"deformable_last_stage":true,"in_channels":3,"modulated_deformable":false,)"
        R"("norm":"batch_norm","stem_channels":32,"strides":[1,2,2,1],"widths":[32,64,128,128]},"box_tolerance":0.5,)"
        R"("box_type":"axis_aligned","num_classes":3,"roi_heads":{"aligned":true,"batch_size_per_image":128,)"
        R"("bg_iou_threshold":0.5,"box_coder_angle_weight":1.0,"box_coder_weights":[10.0,10.0,5.0,5.0],)"
        R"("detections_per_image":100,"fg_iou_threshold":0.5,"min_size":0.01,)"
        R"("nms_threshold":0.5,"pooled_size":7,"positive_fraction":0.25,"representation_size":256,"sampling_ratio":2,)"
        R"("score_threshold":0.05,"smooth_l1_beta":0.1111111111111111},"rotated_edge_swap":false,)"
        R"("rotated_offsets":"image",)"
        R"("rpn":{"anchor_angles_degrees":[-90.0,-60.0,-30.0,0.0,30.0,60.0],"anchor_sizes":[16.0,32.0,64.0],)"
        R"("aspect_ratios":[0.5,1.0,2.0],"batch_size_per_image":256,"bg_iou_threshold":0.3,)"
        R"("box_coder_angle_weight":1.0,"box_coder_weights":[1.0,1.0,1.0,1.0],"fg_iou_threshold":0.7,)"
        R"("match_bounding_boxes":false,"positive_fraction":0.5,)"
        R"("smooth_l1_beta":0.1111111111111111,"test":{"min_size":0.001,"nms_threshold":0.7,"post_nms_top_n":100,)"
        R"("pre_nms_top_n":500,"score_threshold":0.0},"train":{"min_size":0.001,"nms_threshold":0.7,)"
        R"("post_nms_top_n":300,"pre_nms_top_n":1000,"score_threshold":0.0}}})");
}

TEST_CASE("values/detector_config: JSON round trip, partial files and overrides") {
  DetectorConfig config;
  config.num_classes = 5;
  config.backbone.widths = {8, 16};
  config.backbone.blocks = {2, 1};
  config.backbone.strides = {2, 2};
  config.backbone.norm = NormKind::FrozenBatchNorm;
  config.rpn.aspect_ratios = {1.0};
  config.rpn.test_proposals.post_nms_top_n = 42;
  config.roi_heads.box_coder_weights = {1, 2, 3, 4};
  const std::string text = config.to_json();
  const DetectorConfig back = DetectorConfig::from_json(text);
  CHECK(back.to_json() == text);
  CHECK(back.backbone.norm == NormKind::FrozenBatchNorm);
  CHECK(back.rpn.test_proposals.post_nms_top_n == 42);
  CHECK(back.roi_heads.box_coder_weights[3] == 4.0);

  // A partial file keeps every other default.
  const DetectorConfig partial = DetectorConfig::from_json(R"({"rpn": {"train": {"nms_threshold": 0.6}}})");
  CHECK(partial.rpn.train_proposals.nms_threshold == 0.6);
  CHECK(partial.rpn.train_proposals.post_nms_top_n == DetectorConfig().rpn.train_proposals.post_nms_top_n);
  CHECK(partial.num_classes == 3);

  DetectorConfig set;
  set.set("rpn.train.post_nms_top_n=500");
  set.set("backbone.norm=frozen_batch_norm");
  set.set("backbone.widths=[16,32,64,64]");
  set.set("roi_heads.aligned=false");
  CHECK(set.rpn.train_proposals.post_nms_top_n == 500);
  CHECK(set.backbone.norm == NormKind::FrozenBatchNorm);
  CHECK(set.backbone.widths.back() == 64);
  CHECK(!set.roi_heads.aligned);
  CHECK(set.resolved().rpn.in_channels == 64);

  // save writes atomically (no .tmp left behind) and load reads it back.
  minidet::test::TempDir dir;
  const std::string path = dir.file("config.json");
  config.save(path);
  CHECK(!std::ifstream(path + ".tmp").good());
  CHECK(DetectorConfig::load(path).to_json() == text);
}

TEST_CASE("errors/detector_config: unknown keys, wrong types, bad JSON and out-of-range values") {
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json(R"({"rpn": {"anchor_size": [8]}})"),
                          "unknown key 'rpn.anchor_size'");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json(R"({"num_clases": 3})"), "unknown key 'num_clases'");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json(R"({"rpn": {"test": {"topk": 3}}})"), "unknown key 'rpn.test.topk'");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json(R"({"num_classes": 2.5})"), "num_classes must be an integer");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json(R"({"num_classes": "3"})"), "num_classes must be an integer");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json(R"({"backbone": {"widths": [8, "x"]}})"),
                          "backbone.widths[1] must be an integer");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json(R"({"backbone": {"norm": "group_norm"}})"),
                          "backbone.norm must be \"batch_norm\", \"sync_batch_norm\" or \"frozen_batch_norm\"");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json(R"({"roi_heads": {"box_coder_weights": [1, 2]}})"),
                          "roi_heads.box_coder_weights must be a list of 4 numbers");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json(R"({"rpn": 3})"), "rpn must be an object");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json(R"({"roi_heads": {"aligned": 1}})"),
                          "roi_heads.aligned must be true or false");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json("[1, 2]"), "expected a JSON object");
  CHECK_THROWS_CONTAINING(DetectorConfig::from_json("{\"num_classes\": 3,"), "not valid JSON");
  CHECK_THROWS_CONTAINING(DetectorConfig::load("/nonexistent/config.json"), "cannot open");

  DetectorConfig set;
  CHECK_THROWS_CONTAINING(set.set("rpn.train.post_nms=5"), "unknown key 'rpn.train.post_nms'");
  CHECK_THROWS_CONTAINING(set.set("no_equals_sign"), "--set expects dotted.key=value, got 'no_equals_sign'");
  CHECK_THROWS_CONTAINING(set.set("rpn..train=1"), "empty part in key");

  auto invalid = [](const char* assignment, const char* fragment) {
    DetectorConfig c;
    c.set(assignment);
    CAPTURE(assignment);
    CHECK_THROWS_CONTAINING(c.validate(), fragment);
  };
  invalid("num_classes=0", "num_classes must be at least 1");
  invalid("rpn.anchor_sizes=[]", "rpn.anchor_sizes must be a non-empty list");
  invalid("rpn.aspect_ratios=[1, -2]", "rpn.aspect_ratios must be positive");
  invalid("rpn.positive_fraction=1.5", "rpn.positive_fraction must be in [0, 1]");
  invalid("rpn.bg_iou_threshold=0.8", "rpn.bg_iou_threshold must be in [0, rpn.fg_iou_threshold]");
  invalid("rpn.batch_size_per_image=0", "rpn.batch_size_per_image must be at least 1");
  invalid("rpn.train.post_nms_top_n=0", "rpn.train");
  invalid("rpn.test.nms_threshold=2", "rpn.test");
  invalid("backbone.widths=[32, 64]", "backbone.blocks must be one entry per stage");
  invalid("backbone.strides=[1, 2, 3, 1]", "backbone.strides must be 1 or 2");
  invalid("roi_heads.batch_size_per_image=0", "roi_heads");
  invalid("roi_heads.box_coder_weights=[10, 10, 0, 5]", "roi_heads.box_coder_weights must be positive");
  invalid("box_tolerance=-1", "box_tolerance must be >= 0");
}
