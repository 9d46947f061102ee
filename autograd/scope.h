// Module scopes: which module created each node of the graph ("backbone.stage4.0.conv1", "rpn.head").
//
// nn::Module opens its dotted path in the module tree while its forward runs (nn/module/module.h), the way
// named_parameters() spells it, so a block called on its own (model.roi_heads->box_head->forward) still
// reads "roi_heads.box_head". Code outside modules nests names by hand with ScopeGuard("name"). While a ScopeRecordingGuard is alive, every Node created remembers the
// dotted path of the scopes open at that moment (Node::scope); the backward explorer groups nodes by it.
//
//   autograd::ScopeRecordingGuard scopes;        // from here on, new nodes remember their module
//   Losses losses = model.forward_train(batch);  // conv2d created inside backbone.stem.conv: scope
//                                                //   "backbone.stem.conv"
//
// Off (no guard), a ScopeGuard does nothing but test one thread-local flag: training pays no string work.
#pragma once

#include <string>

namespace minidet::autograd {

// Whether new nodes record their scope on this thread.
bool scopes_recording();
// The dotted path of the scopes open now ("" at the top); meaningful only while scopes are recorded.
const std::string& current_scope();

class ScopeRecordingGuard {
 public:
  ScopeRecordingGuard();
  ~ScopeRecordingGuard();
  ScopeRecordingGuard(const ScopeRecordingGuard&) = delete;
  ScopeRecordingGuard& operator=(const ScopeRecordingGuard&) = delete;

 private:
  bool previous_;
};

// Until destroyed, when scopes are recorded: opens scope `name` inside the current one ("conv1" inside
// "backbone.stem" is "backbone.stem.conv1"), or with replace, makes `name` the whole current path.
class ScopeGuard {
 public:
  explicit ScopeGuard(const std::string& name, bool replace = false);
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  bool active_ = false;
  std::string previous_;  // the path to restore
};

}  // namespace minidet::autograd
