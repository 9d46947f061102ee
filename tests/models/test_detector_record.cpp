// The backward record of one detector training step (what `minidet explain` and the backward explorer show):
// every node carries the module that made it, spelled as named_parameters() spells it, every leaf its
// parameter and that parameter's .grad, and the record of a 128-pixel step stays small enough for a page.
#include <map>
#include <set>

#include "autograd/backward_record.h"
#include "autograd/engine.h"
#include "autograd/scope.h"
#include "autograd/trace.h"
#include "data/loader/loader.h"
#include "data/shapes/shapes_dataset.h"
#include "models/faster_rcnn/faster_rcnn.h"
#include "tests/support.h"

using namespace minidet;

TEST_CASE("values/detector_record: a detector step's nodes carry their module paths and leaves their .grad") {
  Generator init(0);
  models::FasterRCNN model(models::DetectorConfig{}, &init);
  std::map<std::string, Tensor> parameters;
  for (const auto& [name, p] : model.named_parameters()) {
    autograd::set_name(p, name);
    parameters[name] = p;
  }
  data::ShapesOptions shapes;
  const data::ShapesDataset dataset(data::Split::kTest, shapes);
  const data::Batch batch = data::collate({dataset.get(0)}, {0});

  Generator step(0);
  autograd::BackwardRecord record;
  {
    autograd::ScopeRecordingGuard scopes;
    models::Losses losses = model.forward_train(batch, &step);
    for (const auto& [name, loss] : losses) autograd::set_name(loss, name);
    record = autograd::record_backward({models::FasterRCNN::total_loss(losses)});
  }
  std::multimap<std::string, std::string> scopes_of;  // op -> scope
  std::set<std::string> output_names;
  int64_t leaves = 0;
  for (const autograd::RecordedNode& n : record.nodes) {
    scopes_of.emplace(n.op, n.scope);
    for (const std::string& name : n.output_names) output_names.insert(name);
    if (!n.is_leaf()) continue;
    ++leaves;
    // A leaf is a parameter, in its module's scope, and its record is the .grad it ends the step with.
    REQUIRE(parameters.count(n.leaf) == 1);
    CHECK(n.leaf.rfind(n.scope + ".", 0) == 0);
    REQUIRE(n.leaf_grad.has_value());
    CHECK(n.leaf_grad->norm == doctest::Approx(autograd::l2_norm(parameters[n.leaf].grad())).epsilon(1e-12));
  }
  CHECK(leaves == static_cast<int64_t>(parameters.size()));  // every parameter gets a gradient in one step
  const auto has = [&](const std::string& op, const std::string& scope) {
    const auto range = scopes_of.equal_range(op);
    for (auto it = range.first; it != range.second; ++it)
      if (it->second == scope) return true;
    return false;
  };
  const std::string last_stage = "backbone.stage" + std::to_string(model.backbone->stages.size()) + ".0";
  CHECK(has("deform_conv2d", last_stage + ".conv1"));
  CHECK(has("conv2d", last_stage + ".conv1.offset_conv"));
  CHECK(has("conv2d", "rpn.head.conv"));
  CHECK(has("roi_align", "roi_heads"));
  CHECK(has("linear", "roi_heads.box_head.fc6"));
  CHECK(output_names.count("loss_box_reg") == 1);
  CHECK(output_names.count("loss_objectness") == 1);
  // The page holds this record: a detector step must stay well under the 5 MB a browser opens at once.
  CHECK(record.to_json().size() < 2'000'000);
}
