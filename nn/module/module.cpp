#include "nn/module/module.h"

#include <functional>
#include <sstream>

#include "autograd/engine.h"
#include "core/error.h"

namespace minidet::nn {

void Module::check_new_name(const std::string& name) const {
  MINIDET_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name_, ": invalid name '", name,
                "' (names must be non-empty and contain no '.')");
  auto taken = [&](const auto& list) {
    for (const auto& entry : list)
      if (entry.first == name) return true;
    return false;
  };
  MINIDET_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), type_name_, ": the name '", name,
                "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name);
  MINIDET_CHECK(tensor.defined(), type_name_, ": parameter '", name, "' is undefined");
  if (requires_grad) tensor.requires_grad_();
  parameters_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name(name);
  MINIDET_CHECK(tensor.defined(), type_name_, ": buffer '", name, "' is undefined");
  buffers_.emplace_back(name, tensor);
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  MINIDET_CHECK(module != nullptr, type_name_, ": submodule '", name, "' is null");
  if (module->registered_in_ == nullptr) {  // a module registered twice keeps its first place
    module->registered_in_ = this;
    module->set_path(path_.empty() ? name : path_ + "." + name);
  }
  children_.emplace_back(name, std::move(module));
}

// Children are usually registered before their parent is (constructors run inside out), so a new path
// travels down the subtree: each module's path is its first parent's path plus its own name.
void Module::set_path(const std::string& path) {
  path_ = path;
  for (const auto& [name, child] : children_)
    if (child->registered_in_ == this) child->set_path(path_ + "." + name);
}

void Module::collect(NamedTensors& out, std::unordered_set<const TensorImpl*>& seen, const std::string& prefix,
                     bool parameters, bool recurse) const {
  for (const auto& [name, tensor] : parameters ? parameters_ : buffers_)
    if (seen.insert(tensor.impl()).second) out.emplace_back(prefix + name, tensor);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(out, seen, prefix + name + ".", parameters, true);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  collect(out, seen, "", true, recurse);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  collect(out, seen, "", false, recurse);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::apply_to_tensors(const std::function<Tensor(const Tensor&)>& convert) {
  NoGradGuard no_grad;
  for (auto* list : {&parameters_, &buffers_}) {
    for (auto& [name, tensor] : *list) {
      tensor.set_data(convert(tensor));
      if (Tensor g = tensor.grad(); g.defined()) g.set_data(convert(g));
    }
  }
  for (auto& [name, child] : children_) child->apply_to_tensors(convert);
}

void Module::to(const Device& device) {
  apply_to_tensors([&](const Tensor& t) { return t.to(device); });
}

void Module::to(DType dtype) {
  // Only floating tensors convert: integer buffers (e.g. a step counter) keep their type.
  apply_to_tensors([&](const Tensor& t) { return is_floating(t.dtype()) ? t.to(dtype) : t; });
}

void Module::zero_grad(bool set_to_none) {
  for (const Tensor& p : parameters()) autograd::zero_grad(p, set_to_none);
}

namespace {
std::string with_thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}
}  // namespace

void Module::describe_into(std::ostream& out, const std::string& label, int depth) const {
  out << std::string(2 * depth, ' ') << label << type_name_;
  const std::string extra = extra_repr();
  if (!extra.empty()) out << "(" << extra << ")";
  out << " (" << with_thousands(num_parameters()) << " parameters)\n";
  for (const auto& [name, child] : children_) child->describe_into(out, "(" + name + "): ", depth + 1);
}

std::vector<Tensor> Module::call_replacement(const std::vector<Tensor>& inputs, size_t outputs) const {
  std::vector<Tensor> result = forward_replacement_(inputs);
  MINIDET_CHECK(result.size() >= outputs, type_name_, ": its forward replacement returned ", result.size(),
                " tensors, expected ", outputs);
  return result;
}

std::string Module::describe() const {
  std::ostringstream out;
  describe_into(out, "", 0);
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Module& module) { return out << module.describe(); }

}  // namespace minidet::nn
