#include "core/tensor.h"

#include <algorithm>
#include <atomic>
#include <optional>

namespace minidet {
namespace {

std::atomic<int64_t> g_live_tensors{0};

// A new tensor that shares `base`'s storage with other sizes/strides/offset.
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(base.storage(), std::move(sizes), std::move(strides), offset,
                                             base.dtype()));
}

// Replaces a single -1 in `shape` by the size that keeps numel unchanged.
Shape infer_size(const Shape& shape, int64_t numel, const char* what) {
  Shape out = shape;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      MINIDET_CHECK(infer_at < 0, what, ": only one size may be -1, got ", shape);
      infer_at = static_cast<int>(i);
    } else {
      MINIDET_CHECK(shape[i] >= 0, what, ": invalid size ", shape[i], " in ", shape);
      known *= shape[i];
    }
  }
  if (infer_at >= 0) {
    MINIDET_CHECK(known != 0 && numel % known == 0, what, ": shape ", shape, " is invalid for ", numel,
                  " elements");
    out[infer_at] = numel / known;
  } else {
    MINIDET_CHECK(known == numel, what, ": shape ", shape, " is invalid for ", numel, " elements");
  }
  return out;
}

// Strides that let `new_sizes` view the memory of (old_sizes, old_strides) without copying, if any exist.
//
// The old dims split into chunks that are contiguous among themselves (stride[d] == stride[d+1]*size[d+1]).
// A view is possible when every new dim falls inside one chunk, i.e. the new sizes regroup each chunk's
// elements without crossing a chunk boundary. Walk both shapes from the innermost dim outwards.
std::optional<Shape> view_strides(const Shape& old_sizes, const Shape& old_strides, const Shape& new_sizes) {
  Shape new_strides(new_sizes.size(), 0);
  if (old_sizes.empty() || shape_numel(old_sizes) == 0) return contiguous_strides(new_sizes);
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    const bool chunk_ends = tensor_d == 0 || (old_sizes[tensor_d - 1] != 1 &&
                                              old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_sizes[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = old_strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace

// ---- free helpers ---------------------------------------------------------------------------------------

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * std::max<int64_t>(sizes[d + 1], 1);
  return strides;
}

int64_t shape_numel(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    MINIDET_CHECK(!__builtin_mul_overflow(n, s, &n), "shape ", sizes, " has more elements than int64 can count");
  }
  return n;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* what) {
  const int64_t lo = -std::max<int64_t>(ndim, 1), hi = std::max<int64_t>(ndim, 1) - 1;
  MINIDET_CHECK(dim >= lo && dim <= hi, what, ": dim ", dim, " is out of range for a tensor with ", ndim,
                " dims (expected ", lo, " to ", hi, ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

Tensor make_tensor(const Shape& sizes, const TensorOptions& options) {
  for (int64_t s : sizes) MINIDET_CHECK(s >= 0, "make_tensor: negative size in ", sizes);
  const int64_t numel = shape_numel(sizes);
  size_t nbytes = 0;
  MINIDET_CHECK(!__builtin_mul_overflow(static_cast<size_t>(numel), element_size(options.dtype), &nbytes),
                "make_tensor: shape ", sizes, " of ", options.dtype, " needs more bytes than size_t can count");
  Storage storage = make_storage(nbytes, options.device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0,
                                             options.dtype));
}

void check_not_recording(const Tensor& tensor, const char* what) {
  MINIDET_CHECK(!(GradMode::is_enabled() && tensor.requires_grad()), "Tensor::", what,
                " does not record gradients, and this tensor requires grad. Use the differentiable "
                "minidet::", what, " from ops/, call detach() first, or run inside a NoGradGuard.");
}

// ---- TensorImpl -----------------------------------------------------------------------------------------

TensorImpl::TensorImpl(Storage storage_, Shape sizes_, Shape strides_, int64_t offset_, DType dtype_)
    : storage(std::move(storage_)), sizes(std::move(sizes_)), strides(std::move(strides_)),
      storage_offset(offset_), dtype(dtype_), numel(shape_numel(sizes)) {
  g_live_tensors.fetch_add(1, std::memory_order_relaxed);
}

TensorImpl::~TensorImpl() { g_live_tensors.fetch_sub(1, std::memory_order_relaxed); }

int64_t TensorImpl::live_count() { return g_live_tensors.load(std::memory_order_relaxed); }

// ---- metadata -------------------------------------------------------------------------------------------

void Tensor::check_defined(const char* what) const {
  MINIDET_CHECK(defined(), "Tensor::", what, ": the tensor is undefined (default-constructed)");
}

const Shape& Tensor::sizes() const { check_defined("sizes"); return impl_->sizes; }
const Shape& Tensor::strides() const { check_defined("strides"); return impl_->strides; }
int64_t Tensor::dim() const { check_defined("dim"); return static_cast<int64_t>(impl_->sizes.size()); }
int64_t Tensor::numel() const { check_defined("numel"); return impl_->numel; }
int64_t Tensor::storage_offset() const { check_defined("storage_offset"); return impl_->storage_offset; }
DType Tensor::dtype() const { check_defined("dtype"); return impl_->dtype; }
Device Tensor::device() const { check_defined("device"); return impl_->storage->device(); }
const Storage& Tensor::storage() const { check_defined("storage"); return impl_->storage; }

int64_t Tensor::size(int64_t d) const {
  MINIDET_CHECK(dim() > 0, "Tensor::size: a 0-dim tensor has no dims");
  return sizes()[wrap_dim(d, dim(), "Tensor::size")];
}

int64_t Tensor::stride(int64_t d) const {
  MINIDET_CHECK(dim() > 0, "Tensor::stride: a 0-dim tensor has no dims");
  return strides()[wrap_dim(d, dim(), "Tensor::stride")];
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (impl_->sizes[d] == 1) continue;  // the stride of a size-1 dim never matters
    if (impl_->strides[d] != expected) return false;
    expected *= impl_->sizes[d];
  }
  return true;
}

void* Tensor::raw_data() const {
  check_defined("raw_data");
  return static_cast<char*>(impl_->storage->data()) + impl_->storage_offset * element_size(impl_->dtype);
}

// ---- views ----------------------------------------------------------------------------------------------

Tensor Tensor::view(const Shape& shape) const {
  check_not_recording(*this, "view");
  const Shape new_sizes = infer_size(shape, numel(), "Tensor::view");
  auto strides = view_strides(sizes(), this->strides(), new_sizes);
  MINIDET_CHECK(strides.has_value(), "Tensor::view: shape ", shape, " is not compatible with sizes ", sizes(),
                " and strides ", this->strides(), " (a dim would span non-adjacent memory); use reshape()");
  return make_view(*this, new_sizes, *strides, storage_offset());
}

Tensor Tensor::reshape(const Shape& shape) const {
  check_not_recording(*this, "reshape");
  const Shape new_sizes = infer_size(shape, numel(), "Tensor::reshape");
  if (auto strides = view_strides(sizes(), this->strides(), new_sizes))
    return make_view(*this, new_sizes, *strides, storage_offset());
  return contiguous().view(new_sizes);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "Tensor::flatten");
  end_dim = wrap_dim(end_dim, dim(), "Tensor::flatten");
  MINIDET_CHECK(start_dim <= end_dim, "Tensor::flatten: start_dim ", start_dim, " is after end_dim ", end_dim);
  Shape shape(sizes().begin(), sizes().begin() + start_dim);
  int64_t merged = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) merged *= sizes()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), sizes().begin() + end_dim + 1, sizes().end());
  return reshape(shape);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  check_not_recording(*this, "permute");
  MINIDET_CHECK(static_cast<int64_t>(dims.size()) == dim(), "Tensor::permute: expected ", dim(),
                " dims, got ", dims);
  Shape new_sizes(dim()), new_strides(dim());
  std::vector<bool> seen(dim(), false);
  for (int64_t i = 0; i < dim(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "Tensor::permute");
    MINIDET_CHECK(!seen[d], "Tensor::permute: dim ", d, " repeats in ", dims);
    seen[d] = true;
    new_sizes[i] = sizes()[d];
    new_strides[i] = strides()[d];
  }
  return make_view(*this, new_sizes, new_strides, storage_offset());
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  std::vector<int64_t> order(dim());
  for (int64_t i = 0; i < dim(); ++i) order[i] = i;
  if (dim() == 0) return permute(order);
  std::swap(order[wrap_dim(dim0, dim(), "Tensor::transpose")], order[wrap_dim(dim1, dim(), "Tensor::transpose")]);
  return permute(order);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_not_recording(*this, "slice");
  MINIDET_CHECK(dim() > 0, "Tensor::slice: cannot slice a 0-dim tensor");
  d = wrap_dim(d, dim(), "Tensor::slice");
  MINIDET_CHECK(step > 0, "Tensor::slice: step must be positive, got ", step);
  const int64_t n = sizes()[d];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Shape new_sizes = sizes(), new_strides = strides();
  new_sizes[d] = (end - start + step - 1) / step;
  new_strides[d] *= step;
  return make_view(*this, new_sizes, new_strides, storage_offset() + start * strides()[d]);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  MINIDET_CHECK(dim() > 0, "Tensor::narrow: cannot narrow a 0-dim tensor");
  d = wrap_dim(d, dim(), "Tensor::narrow");
  const int64_t n = sizes()[d];
  if (start < 0) start += n;
  MINIDET_CHECK(start >= 0 && length >= 0 && start + length <= n, "Tensor::narrow: range [", start, ", ",
                start + length, ") is out of bounds for dim ", d, " of size ", n);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_not_recording(*this, "select");
  MINIDET_CHECK(dim() > 0, "Tensor::select: cannot select from a 0-dim tensor");
  d = wrap_dim(d, dim(), "Tensor::select");
  const int64_t n = sizes()[d];
  MINIDET_CHECK(index >= -n && index < n, "Tensor::select: index ", index, " is out of range for dim ", d,
                " of size ", n);
  if (index < 0) index += n;
  Shape new_sizes = sizes(), new_strides = strides();
  new_sizes.erase(new_sizes.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  return make_view(*this, new_sizes, new_strides, storage_offset() + index * strides()[d]);
}

Tensor Tensor::expand(const Shape& shape) const {
  check_not_recording(*this, "expand");
  const int64_t new_dim = static_cast<int64_t>(shape.size());
  MINIDET_CHECK(new_dim >= dim(), "Tensor::expand: cannot expand shape ", sizes(), " to fewer dims ", shape);
  Shape new_sizes(new_dim), new_strides(new_dim);
  for (int64_t i = new_dim - 1; i >= 0; --i) {
    const int64_t old_i = i - (new_dim - dim());  // dims align from the right, as in broadcasting
    if (old_i < 0) {
      MINIDET_CHECK(shape[i] >= 0, "Tensor::expand: a new leading dim cannot be -1 in ", shape);
      new_sizes[i] = shape[i];
      new_strides[i] = 0;
      continue;
    }
    const int64_t old_size = sizes()[old_i];
    const int64_t want = shape[i] == -1 ? old_size : shape[i];
    if (want == old_size) {
      new_sizes[i] = old_size;
      new_strides[i] = strides()[old_i];
    } else {
      // Without this, expand({-2}) would make a tensor with a negative size (and a negative numel).
      MINIDET_CHECK(want >= 0, "Tensor::expand: invalid size ", shape[i], " in ", shape);
      MINIDET_CHECK(old_size == 1, "Tensor::expand: cannot expand shape ", sizes(), " to ", shape, " (dim ",
                    old_i, " has size ", old_size, ", only size-1 dims broadcast)");
      new_sizes[i] = want;
      new_strides[i] = 0;  // every index reads the single element
    }
  }
  return make_view(*this, new_sizes, new_strides, storage_offset());
}

Tensor Tensor::squeeze() const {
  check_not_recording(*this, "squeeze");
  Shape new_sizes, new_strides;
  for (int64_t d = 0; d < dim(); ++d) {
    if (sizes()[d] == 1) continue;
    new_sizes.push_back(sizes()[d]);
    new_strides.push_back(strides()[d]);
  }
  return make_view(*this, new_sizes, new_strides, storage_offset());
}

Tensor Tensor::squeeze(int64_t d) const {
  check_not_recording(*this, "squeeze");
  if (dim() == 0) return make_view(*this, sizes(), strides(), storage_offset());
  d = wrap_dim(d, dim(), "Tensor::squeeze");
  Shape new_sizes = sizes(), new_strides = strides();
  if (new_sizes[d] == 1) {  // like PyTorch, squeezing a dim whose size is not 1 leaves the tensor as is
    new_sizes.erase(new_sizes.begin() + d);
    new_strides.erase(new_strides.begin() + d);
  }
  return make_view(*this, new_sizes, new_strides, storage_offset());
}

Tensor Tensor::unsqueeze(int64_t d) const {
  check_not_recording(*this, "unsqueeze");
  d = wrap_dim(d, dim() + 1, "Tensor::unsqueeze");
  Shape new_sizes = sizes(), new_strides = strides();
  const int64_t stride = d < dim() ? sizes()[d] * strides()[d] : 1;
  new_sizes.insert(new_sizes.begin() + d, 1);
  new_strides.insert(new_strides.begin() + d, stride);
  return make_view(*this, new_sizes, new_strides, storage_offset());
}

Tensor Tensor::as_strided(const Shape& new_sizes, const Shape& new_strides, int64_t offset) const {
  check_not_recording(*this, "as_strided");
  MINIDET_CHECK(new_sizes.size() == new_strides.size(), "Tensor::as_strided: sizes ", new_sizes,
                " and strides ", new_strides, " differ in length");
  MINIDET_CHECK(offset >= 0, "Tensor::as_strided: negative storage offset ", offset);
  int64_t last = offset;
  for (size_t d = 0; d < new_sizes.size(); ++d) {
    MINIDET_CHECK(new_sizes[d] >= 0 && new_strides[d] >= 0, "Tensor::as_strided: negative size or stride");
    if (new_sizes[d] == 0) last = -1;
    if (last >= 0) last += (new_sizes[d] - 1) * new_strides[d];
  }
  const int64_t capacity = static_cast<int64_t>(storage()->nbytes() / element_size(dtype()));
  MINIDET_CHECK(last < capacity, "Tensor::as_strided: the view reaches element ", last,
                " but the storage holds ", capacity);
  return make_view(*this, new_sizes, new_strides, offset);
}

Tensor Tensor::detach() const {
  check_defined("detach");
  return make_view(*this, sizes(), strides(), storage_offset());
}

const Tensor& Tensor::make_read_only(const char* reason) const {
  check_defined("make_read_only");
  MINIDET_CHECK(reason != nullptr && *reason != '\0', "Tensor::make_read_only: give the reason");
  storage()->make_read_only(reason);
  return *this;
}

void Tensor::set_data(const Tensor& other) const {
  check_defined("set_data");
  storage()->check_writable();  // a read-only constant keeps its data
  MINIDET_CHECK(other.defined(), "Tensor::set_data: the new data is undefined");
  impl_->storage = other.storage();
  impl_->sizes = other.sizes();
  impl_->strides = other.strides();
  impl_->storage_offset = other.storage_offset();
  impl_->dtype = other.dtype();
  impl_->numel = other.numel();
}

// ---- autograd state -------------------------------------------------------------------------------------

AutogradMeta& Tensor::autograd_meta() const {
  check_defined("autograd_meta");
  if (!impl_->autograd) impl_->autograd = std::make_unique<AutogradMeta>();
  return *impl_->autograd;
}

AutogradMeta* Tensor::autograd_meta_if_exists() const { return impl_ ? impl_->autograd.get() : nullptr; }

bool Tensor::requires_grad() const {
  const AutogradMeta* meta = autograd_meta_if_exists();
  return meta != nullptr && (meta->requires_grad || meta->grad_fn != nullptr);
}

Tensor& Tensor::requires_grad_(bool requires) {
  MINIDET_CHECK(!requires || is_floating(dtype()), "Tensor::requires_grad_: only float32/float64 tensors can ",
                "require grad, this one is ", dtype());
  MINIDET_CHECK(is_leaf(), "Tensor::requires_grad_: can only change leaves; this tensor was produced by an "
                "op (use detach() to get a leaf)");
  autograd_meta().requires_grad = requires;
  return *this;
}

bool Tensor::is_leaf() const {
  const AutogradMeta* meta = autograd_meta_if_exists();
  return meta == nullptr || meta->grad_fn == nullptr;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  const AutogradMeta* meta = autograd_meta_if_exists();
  return meta ? meta->grad_fn : none;
}

Tensor Tensor::grad() const {
  const AutogradMeta* meta = autograd_meta_if_exists();
  return meta ? meta->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined()) {
    MINIDET_CHECK(grad.sizes() == sizes() && grad.dtype() == dtype() && grad.device() == device(),
                  "Tensor::set_grad: gradient ", grad.sizes(), " ", grad.dtype(), " on ", grad.device(),
                  " does not match tensor ", sizes(), " ", dtype(), " on ", device());
  }
  autograd_meta().grad = grad;
}

}  // namespace minidet
