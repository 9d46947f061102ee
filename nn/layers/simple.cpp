#include "nn/layers/simple.h"

#include "ops/elementwise/unary.h"
#include "ops/shape/views.h"

namespace minidet::nn {

namespace {
std::string pool_repr(const Pool2dOptions& o) {
  std::string s = "kernel=" + std::to_string(o.kernel_h) + "x" + std::to_string(o.kernel_w);
  if (o.stride_h) s += ", stride=" + std::to_string(o.stride_h) + "x" + std::to_string(o.stride_w);
  if (o.pad_h || o.pad_w) s += ", padding=" + std::to_string(o.pad_h) + "x" + std::to_string(o.pad_w);
  if (o.ceil_mode) s += ", ceil_mode=true";
  return s;
}
}  // namespace

Tensor ReLU::forward(const Tensor& input) { return relu(input); }
Tensor MaxPool2d::forward(const Tensor& input) { return max_pool2d(input, options); }
std::string MaxPool2d::extra_repr() const { return pool_repr(options); }
Tensor AvgPool2d::forward(const Tensor& input) { return avg_pool2d(input, options); }
std::string AvgPool2d::extra_repr() const { return pool_repr(options); }
Tensor Flatten::forward(const Tensor& input) { return flatten(input, start_dim, end_dim); }

}  // namespace minidet::nn
