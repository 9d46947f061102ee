// Each view: compute the raw view with recording off, then record its backward (formulas in views.h).
//
// The raw Tensor methods refuse a tensor that requires grad while grad mode is on (so that nobody cuts the
// graph by accident); inside a NoGradGuard they run, and the fresh TensorImpl they return becomes the
// recorded output. Backward formulas run under the engine's no-grad mode, so they call raw methods freely.
#include "ops/shape/views.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/common/checks.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;

namespace {

// Output of a raw view method, computed without tripping its requires-grad guard.
template <typename RawView>
Tensor raw_view(const char* op, const Tensor& x, RawView&& make) {
  ops::check_defined(op, x, "input");
  NoGradGuard raw;
  return make(x);
}

// Every view that only regroups elements in row-major order has backward = reshape to the input shape.
void record_reshape_backward(const char* name, const Tensor& x, const Tensor& y) {
  autograd::record(name, {x}, {y}, {}, [](BackwardContext& ctx, const TensorList& g) -> TensorList {
    return {g[0].reshape(ctx.input_sizes(0))};  // a view of g when its strides allow, else a copy
  });
}

// slice/narrow/select pick a sub-block of x: the gradient is that block filled with dy, zeros elsewhere.
// `pick` applies the same raw slicing to a zero tensor of x's shape and returns the view to write into.
template <typename Pick>
void record_pick_backward(const char* name, const Tensor& x, const Tensor& y, Pick pick) {
  autograd::record(name, {x}, {y}, {}, [pick](BackwardContext& ctx, const TensorList& g) -> TensorList {
    Tensor grad_x = zeros(ctx.input_sizes(0), g[0].options());
    pick(grad_x).copy_(g[0]);
    return {grad_x};
  });
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  Tensor y = raw_view("view", x, [&](const Tensor& t) { return t.view(shape); });
  record_reshape_backward("view", x, y);
  return y;
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  Tensor y = raw_view("reshape", x, [&](const Tensor& t) { return t.reshape(shape); });
  record_reshape_backward("reshape", x, y);
  return y;
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  Tensor y = raw_view("flatten", x, [&](const Tensor& t) { return t.flatten(start_dim, end_dim); });
  record_reshape_backward("flatten", x, y);
  return y;
}

Tensor squeeze(const Tensor& x) {
  Tensor y = raw_view("squeeze", x, [](const Tensor& t) { return t.squeeze(); });
  record_reshape_backward("squeeze", x, y);
  return y;
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  Tensor y = raw_view("squeeze", x, [&](const Tensor& t) { return t.squeeze(dim); });
  record_reshape_backward("squeeze", x, y);
  return y;
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  Tensor y = raw_view("unsqueeze", x, [&](const Tensor& t) { return t.unsqueeze(dim); });
  record_reshape_backward("unsqueeze", x, y);
  return y;
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  Tensor y = raw_view("permute", x, [&](const Tensor& t) { return t.permute(dims); });
  // y's dim i is x's dim dims[i]; the inverse sends x's dim dims[i] back to position dims[i].
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inverse[wrap_dim(dims[i], x.dim(), "permute")] = static_cast<int64_t>(i);
  autograd::record("permute", {x}, {y}, {}, [inverse](BackwardContext&, const TensorList& g) -> TensorList {
    return {g[0].permute(inverse)};
  });
  return y;
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  Tensor y = raw_view("transpose", x, [&](const Tensor& t) { return t.transpose(dim0, dim1); });
  // A transposition is its own inverse.
  autograd::record("transpose", {x}, {y}, {}, [dim0, dim1](BackwardContext&, const TensorList& g) -> TensorList {
    return {g[0].transpose(dim0, dim1)};
  });
  return y;
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  Tensor y = raw_view("slice", x, [&](const Tensor& t) { return t.slice(dim, start, end, step); });
  // The same arguments on a tensor of the same shape clamp the same way, so they pick the same block.
  record_pick_backward("slice", x, y, [=](const Tensor& t) { return t.slice(dim, start, end, step); });
  return y;
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  Tensor y = raw_view("narrow", x, [&](const Tensor& t) { return t.narrow(dim, start, length); });
  record_pick_backward("narrow", x, y, [=](const Tensor& t) { return t.narrow(dim, start, length); });
  return y;
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  Tensor y = raw_view("select", x, [&](const Tensor& t) { return t.select(dim, index); });
  record_pick_backward("select", x, y, [=](const Tensor& t) { return t.select(dim, index); });
  return y;
}

Tensor expand(const Tensor& x, const Shape& shape) {
  Tensor y = raw_view("expand", x, [&](const Tensor& t) { return t.expand(shape); });
  // dy has the expanded shape; the engine sums it back to x's shape (sum_to), the one place that undoes
  // broadcasting for every op.
  autograd::record("expand", {x}, {y}, {}, [](BackwardContext&, const TensorList& g) -> TensorList {
    return {g[0]};
  });
  return y;
}

}  // namespace minidet
