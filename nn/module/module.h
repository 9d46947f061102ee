// nn::Module: the base of every layer and model.
//
// A module owns named parameters (tensors the optimizer trains), named buffers (state that is saved but not
// trained, like batch norm's running statistics) and named submodules. Everything is kept in registration
// order, so named_parameters() lists the same dotted paths in the same order on every run:
//
//   class Block : public nn::Module {
//    public:
//     Block() : Module("Block") {
//       conv = register_module("conv", std::make_shared<nn::Conv2d>(3, 8, 3));
//       bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(8));
//     }
//     std::shared_ptr<nn::Conv2d> conv;
//     std::shared_ptr<nn::BatchNorm2d> bn;
//   };
//   block.named_parameters()  ->  conv.weight, conv.bias, bn.weight, bn.bias
//
// The API follows LibTorch's C++ frontend (register_parameter / register_buffer / register_module,
// train() / eval(), to()), without its template machinery: layers are plain classes, and modules with one
// input and one output derive from UnaryModule so that Sequential can chain them.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "autograd/scope.h"
#include "core/tensor.h"

namespace minidet::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  // Dotted names ("backbone.conv1.weight"), parents' own entries first, then each child in order. A tensor
  // registered twice (a weight shared by two layers) is listed once, under its first name, so an optimizer
  // never updates it twice.
  NamedTensors named_parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  int64_t num_parameters() const;

  // Training mode changes behaviour of some layers (BatchNorm2d uses batch statistics). Recursive.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves or converts every parameter and buffer in place: handles held elsewhere follow (set_data).
  void to(const Device& device);
  void to(DType dtype);
  void zero_grad(bool set_to_none = true);

  // The module tree with parameter counts, e.g.
  //   Sequential (1,234 parameters)
  //     (0): Linear(in=4, out=16, bias=true) (80 parameters)
  std::string describe() const;

  // What a call through the module's entry point runs instead of the module's own code, when set: tensors in
  // and out, in the order that code takes and returns them. The entry point is operator(), which replaces
  // forward(), or for a module whose fixed-shape part is one stage of its forward, that stage's entry point,
  // which says so (RoIHeads::box_losses). The training engine installs a CUDA-graph replay here
  // (engine/cuda_graphs.h), as torch.cuda.make_graphed_callables replaces a module's forward, so the model's
  // code has one path and the speed mechanics stay in the engine. The module's own code (forward(), or the
  // stage's forward_ method) always runs as written: the replay captures exactly that. An empty function
  // removes the replacement.
  using ForwardReplacement = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  void replace_forward(ForwardReplacement replacement) { forward_replacement_ = std::move(replacement); }
  bool forward_replaced() const { return static_cast<bool>(forward_replacement_); }

  // Where this module sits in the tree it was first registered into: the dotted prefix its parameters have
  // in the root's named_parameters() ("roi_heads.box_head.fc6"; "" for the root itself).
  const std::string& path() const { return path_; }

 protected:
  // Opens this module's scope, its path(), for the nodes its forward creates (autograd/scope.h), so the
  // backward explorer can say "backbone.stage4.0.conv1" made a node: UnaryModule::operator() opens it around
  // forward(), and a module with another signature at the top of its forward (`const auto scope =
  // open_scope();`). Free unless scopes are being recorded.
  autograd::ScopeGuard open_scope() const { return autograd::ScopeGuard(path_, /*replace=*/true); }

  // operator()'s body for a module with a replacement: the replacement's outputs (at least `outputs` of them).
  std::vector<Tensor> call_replacement(const std::vector<Tensor>& inputs, size_t outputs) const;

  // Registers a trainable tensor; it is marked requires_grad. Returns the same handle.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor tensor);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  // One-line summary of the layer's configuration shown by describe(), e.g. "in=4, out=16, bias=true".
  virtual std::string extra_repr() const { return ""; }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect(NamedTensors& out, std::unordered_set<const TensorImpl*>& seen, const std::string& prefix,
               bool parameters, bool recurse) const;
  void describe_into(std::ostream& out, const std::string& label, int depth) const;
  void apply_to_tensors(const std::function<Tensor(const Tensor&)>& convert);

  std::string type_name_;
  void set_path(const std::string& path);

  std::string path_;
  const Module* registered_in_ = nullptr;  // the parent of its first registration (compared, never followed)
  bool training_ = true;
  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  ForwardReplacement forward_replacement_;
};

// A module with one input and one output; what Sequential chains.
class UnaryModule : public Module {
 public:
  using Module::Module;
  virtual Tensor forward(const Tensor& input) = 0;
  // forward(input), or the replacement the engine installed (replace_forward above).
  Tensor operator()(const Tensor& input) {
    const auto scope = open_scope();
    return forward_replaced() ? call_replacement({input}, 1)[0] : forward(input);
  }
};

std::ostream& operator<<(std::ostream& out, const Module& module);

}  // namespace minidet::nn
