// Factories: functions that make new tensors.
//
//   auto x = zeros({2, 3});                                   // float32 on the CPU
//   auto y = randn({4, 4}, TensorOptions(kFloat64, Device::cuda()));
//   auto z = from_vector<float>({1, 2, 3, 4}, {2, 2});
#pragma once

#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace minidet {

Tensor empty(const Shape& shape, const TensorOptions& options = {});
Tensor zeros(const Shape& shape, const TensorOptions& options = {});
Tensor ones(const Shape& shape, const TensorOptions& options = {});
Tensor full(const Shape& shape, double value, const TensorOptions& options = {});
Tensor scalar_tensor(double value, const TensorOptions& options = {});  // 0-dim

Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);

// [start, end) in steps of step, like Python's range. The default dtype is int64.
Tensor arange(double end, const TensorOptions& options = kInt64);
Tensor arange(double start, double end, double step = 1.0, const TensorOptions& options = kInt64);

// Uniform in [0, 1), standard normal, and uniform integers in [low, high). Drawn in row-major order on the
// host from `generator` (the default generator when null), so every device gets the same numbers.
Tensor rand(const Shape& shape, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor randn(const Shape& shape, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& options = kInt64,
               Generator* generator = nullptr);
Tensor randperm(int64_t n, const TensorOptions& options = kInt64, Generator* generator = nullptr);

// A 1-D tensor holding `values`; with a shape, exactly that shape ({} is a 0-dim tensor of one value).
// The dtype follows T; options.dtype converts afterwards when given.
template <typename T>
Tensor from_vector(const std::vector<T>& values);
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape);
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, const TensorOptions& options) {
  return from_vector<T>(values, shape).to(options);
}

}  // namespace minidet
