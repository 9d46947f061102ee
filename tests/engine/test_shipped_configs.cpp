// The configs shipped in examples/configs/ load, validate and build their detector, so a renamed key or a
// bad value shows here and not in a reader's first run.
#include <string>

#include "engine/run_config.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "tests/support.h"

using namespace minidet;

TEST_CASE("values/shipped_configs: rotated_shapes.json is the oriented detector on the rotated shapes") {
  const std::string path = std::string(MINIDET_SOURCE_DIR) + "/examples/configs/rotated_shapes.json";
  engine::RunConfig config = engine::RunConfig::load(path);
  config.validate();
  CHECK(config.data.synthetic == engine::SyntheticData::kRotatedShapes);
  CHECK(config.detector.box_type == models::BoxType::kRotated);
  CHECK(config.detector.rotated_edge_swap);
  CHECK(config.detector.rpn.loss.match_bounding_boxes);
  // Horizontal anchors, matched by their bounding boxes, regressing rotated boxes: 3 sizes x 5 ratios.
  CHECK(config.detector.rpn.anchor_angles_degrees == std::vector<double>{0.0});
  Generator init(0);
  const models::FasterRCNN model(config.detector, &init);
  CHECK(model.rpn->head->num_anchors == 15);
  CHECK(model.rpn->head->box_dim == 5);
  // Features of stride 4, so a bar a few pixels thick spans more than one feature cell.
  CHECK(model.config().rpn.feature_stride == 4);
}
