// Tensor: a shared handle to (storage, sizes, strides, offset, dtype).
//
// Element (i0, i1, ..., in) of a tensor lives at
//     storage.data + (offset + i0*stride0 + i1*stride1 + ... + in*striden) * element_size
// so permute, transpose, slice, select, expand and unsqueeze are pure stride arithmetic: they return a new
// Tensor over the same Storage, and a write through one is seen by the other. contiguous() and clone()
// are the functions that copy.
//
// Copying a Tensor copies the handle, not the data (like torch.Tensor in Python).
//
// The methods here are the raw, non-recording layer. Their differentiable counterparts are free functions
// in ops/ (minidet::reshape, minidet::permute, ...). So that a graph is never broken silently, a raw method
// that makes a new tensor refuses an input that requires grad while grad mode is on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/grad_mode.h"
#include "core/storage.h"

namespace minidet {

namespace autograd {
class Node;
}

using Shape = std::vector<int64_t>;

// dtype + device for factories. Converts implicitly from either, so zeros({2, 3}, kFloat64) and
// zeros({2, 3}, Device::cuda()) both work; TensorOptions(kFloat64, Device::cuda()) sets both.
struct TensorOptions {
  DType dtype = kFloat32;
  Device device = Device::cpu();

  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}                  // NOLINT(implicit)
  TensorOptions(Device dev) : device(dev) {}            // NOLINT(implicit)
  TensorOptions(DType d, Device dev) : dtype(d), device(dev) {}
  TensorOptions with_dtype(DType d) const { return {d, device}; }
  TensorOptions with_device(Device dev) const { return {dtype, dev}; }
};

struct AutogradMeta;
class TensorImpl;

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (no storage); defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // ---- metadata -------------------------------------------------------------------------------------
  const Shape& sizes() const;
  const Shape& strides() const;
  int64_t size(int64_t dim) const;  // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  int64_t storage_offset() const;
  DType dtype() const;
  Device device() const;
  TensorOptions options() const { return {dtype(), device()}; }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_contiguous() const;
  const Storage& storage() const;

  // ---- data access ----------------------------------------------------------------------------------
  // Typed pointer to element 0 (a device pointer for CUDA tensors). Checks that T matches dtype().
  template <typename T> T* data() const;
  void* raw_data() const;
  // The single element as T, converted from any dtype (copies from the GPU when needed).
  template <typename T = double> T item() const;
  // All elements in row-major order, converted to T, on the host.
  template <typename T> std::vector<T> to_vector() const;

  // ---- views: share storage, never copy -------------------------------------------------------------
  Tensor view(const Shape& shape) const;     // one size may be -1; needs compatible strides
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a contiguous copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const { return transpose(0, 1); }
  // Python-style slice [start:end:step] along dim; start/end are clamped, negatives count from the end.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;  // strict bounds
  Tensor select(int64_t dim, int64_t index) const;                   // removes dim
  Tensor expand(const Shape& shape) const;  // size-1 dims broadcast with stride 0; -1 keeps a size
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t storage_offset) const;

  // ---- copies and conversions -----------------------------------------------------------------------
  Tensor contiguous() const;  // itself if already contiguous
  Tensor clone() const;       // always a new contiguous buffer
  Tensor to(const Device& device) const;  // itself if already there
  Tensor to(DType dtype) const;
  Tensor to(const TensorOptions& options) const;
  // A new tensor over the same storage that is cut from the graph: no grad_fn, requires_grad false.
  Tensor detach() const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }

  // Makes this tensor use other's storage, sizes, strides and dtype, keeping its identity and autograd
  // state (like PyTorch's set_data). Module::to() uses it so every handle to a parameter follows the move.
  void set_data(const Tensor& other) const;

  // ---- in place: bump the storage version ----------------------------------------------------------
  // Tensor is a handle, so writing through a const handle is allowed (as in LibTorch).
  const Tensor& fill_(double value) const;
  const Tensor& zero_() const { return fill_(0.0); }
  // Copies src into this tensor: src broadcasts to this shape, converts dtype, may be on another device.
  const Tensor& copy_(const Tensor& src) const;

  // ---- autograd state (the engine that uses it lives in autograd/) ----------------------------------
  bool requires_grad() const;
  // Marks a leaf as a parameter whose .grad() backward fills. Only floating tensors can require grad.
  Tensor& requires_grad_(bool requires = true);
  Tensor grad() const;  // undefined until backward reaches this tensor
  void set_grad(const Tensor& grad) const;
  bool is_leaf() const;  // no grad_fn: created by the user, not by a recorded op
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  AutogradMeta& autograd_meta() const;  // created on first use
  AutogradMeta* autograd_meta_if_exists() const;
  // Runs backward from this tensor (defined in autograd/engine.cpp; see there). grad defaults to 1 for a
  // single-element tensor.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  uint64_t version() const { return storage()->version(); }
  // Throws if the storage is read-only (core/storage.h): every in-place write calls it.
  void bump_version() const { storage()->bump_version(); }
  // Makes the whole storage read-only, for every view of it: later in-place writes (fill_, copy_, optimiser
  // steps, gradient accumulation...) and set_data throw an Error quoting `reason`, a string literal.
  const Tensor& make_read_only(const char* reason) const;
  bool is_read_only() const { return storage()->read_only(); }

  std::string str() const;  // what operator<< prints

 private:
  void check_defined(const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

class TensorImpl {
 public:
  TensorImpl(Storage storage, Shape sizes, Shape strides, int64_t storage_offset, DType dtype);
  ~TensorImpl();

  Storage storage;
  Shape sizes;
  Shape strides;  // in elements, not bytes
  int64_t storage_offset;
  DType dtype;
  int64_t numel;
  std::unique_ptr<AutogradMeta> autograd;  // null for tensors that never took part in autograd

  static int64_t live_count();  // how many TensorImpls exist right now (for leak tests)
};

// What autograd keeps per tensor. Declared here because it hangs off TensorImpl; only autograd/ acts on it.
struct AutogradMeta {
  bool requires_grad = false;                    // set on leaves by requires_grad_()
  Tensor grad;                                   // accumulated by backward
  std::shared_ptr<autograd::Node> grad_fn;       // the recorded op that produced this tensor
  uint32_t output_nr = 0;                        // which output of grad_fn this tensor is
  std::weak_ptr<autograd::Node> grad_accumulator;  // the leaf's gradient sink, shared by all its uses
  bool retains_grad = false;                     // a non-leaf that also stores .grad
  std::vector<std::function<Tensor(const Tensor&)>> hooks;  // may inspect or replace the gradient
  // Leaves only: run after backward has added into .grad (autograd::register_post_accumulate_grad_hook).
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
  std::string name;                              // optional label for traces and DOT graphs
};

// Row-major strides of a contiguous tensor of `sizes`.
Shape contiguous_strides(const Shape& sizes);
int64_t shape_numel(const Shape& sizes);
// Wraps a possibly negative dim into [0, ndim); `what` names the caller for the error message.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* what);
// A new tensor over a fresh, uninitialised buffer.
Tensor make_tensor(const Shape& sizes, const TensorOptions& options);
// Throws when a raw (non-recording) operation would silently cut the autograd graph.
void check_not_recording(const Tensor& tensor, const char* what);

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

// ---- template definitions ------------------------------------------------------------------------------

template <typename T>
T* Tensor::data() const {
  check_defined("data");
  MINIDET_CHECK(DTypeOf<T>::value == dtype(), "Tensor::data<", dtype_name(DTypeOf<T>::value),
                ">: tensor has dtype ", dtype());
  return static_cast<T*>(raw_data());
}

template <typename T>
T Tensor::item() const {
  check_defined("item");
  MINIDET_CHECK(numel() == 1, "Tensor::item: expected a tensor with one element, got shape ", sizes());
  return to_vector<T>()[0];
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  check_defined("to_vector");
  NoGradGuard reading_only;  // reading values never cuts the graph, so the raw-method guard does not apply
  Tensor host = to(TensorOptions(DTypeOf<T>::value, Device::cpu())).contiguous();
  const T* begin = host.template data<T>();
  return std::vector<T>(begin, begin + host.numel());
}

}  // namespace minidet
