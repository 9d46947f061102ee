#include "core/factories.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace minidet {
namespace {

// Fills a host buffer element by element with draw(), converted to the dtype, then moves it to the device.
template <typename Draw>
Tensor host_generated(const Shape& shape, const TensorOptions& options, Draw draw) {
  Tensor host = make_tensor(shape, TensorOptions(options.dtype, Device::cpu()));
  MINIDET_DISPATCH_ALL(options.dtype, "random factory", [&] {
    scalar_t* out = host.data<scalar_t>();
    for (int64_t i = 0; i < host.numel(); ++i) out[i] = static_cast<scalar_t>(draw(i));
  });
  return host.to(options.device);
}

Generator& pick(Generator* generator) { return generator ? *generator : default_generator(); }

}  // namespace

Tensor empty(const Shape& shape, const TensorOptions& options) { return make_tensor(shape, options); }
Tensor zeros(const Shape& shape, const TensorOptions& options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, const TensorOptions& options) { return full(shape, 1.0, options); }

Tensor full(const Shape& shape, double value, const TensorOptions& options) {
  Tensor t = make_tensor(shape, options);
  t.fill_(value);
  return t;
}

Tensor scalar_tensor(double value, const TensorOptions& options) { return full({}, value, options); }

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.options()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.options()); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), t.options()); }
Tensor full_like(const Tensor& t, double value) { return full(t.sizes(), value, t.options()); }

Tensor arange(double end, const TensorOptions& options) { return arange(0.0, end, 1.0, options); }

Tensor arange(double start, double end, double step, const TensorOptions& options) {
  MINIDET_CHECK(step != 0.0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
                "arange: need finite start/end and a nonzero step, got (", start, ", ", end, ", ", step, ")");
  const double count = std::ceil((end - start) / step);
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  return host_generated({n}, options, [&](int64_t i) { return start + static_cast<double>(i) * step; });
}

Tensor rand(const Shape& shape, const TensorOptions& options, Generator* generator) {
  MINIDET_CHECK(is_floating(options.dtype), "rand: expected a floating dtype, got ", options.dtype);
  Generator& g = pick(generator);
  // A double draw above 1 - 2^-25 rounds to 1.0f, which would break [0, 1) for float32. Clamp those draws to
  // the largest float below 1 (0x1.fffffep-1); float64 draws are left untouched.
  const double high = options.dtype == kFloat32 ? 0x1.fffffep-1 : 1.0;
  return host_generated(shape, options, [&](int64_t) { return std::min(g.next_uniform(), high); });
}

Tensor randn(const Shape& shape, const TensorOptions& options, Generator* generator) {
  MINIDET_CHECK(is_floating(options.dtype), "randn: expected a floating dtype, got ", options.dtype);
  Generator& g = pick(generator);
  return host_generated(shape, options, [&](int64_t) { return g.next_normal(); });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& options,
               Generator* generator) {
  MINIDET_CHECK(low < high, "randint: empty range [", low, ", ", high, ")");
  Generator& g = pick(generator);
  std::vector<int64_t> values(static_cast<size_t>(shape_numel(shape)));
  for (int64_t& v : values) v = g.next_int(low, high);  // exact: never through double
  return from_vector<int64_t>(values, shape).to(options);
}

Tensor randperm(int64_t n, const TensorOptions& options, Generator* generator) {
  MINIDET_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  Generator& g = pick(generator);
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[g.next_int(0, i + 1)]);  // Fisher-Yates
  return from_vector<int64_t>(perm, {n}).to(options);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values) {
  return from_vector<T>(values, {static_cast<int64_t>(values.size())});
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  MINIDET_CHECK(shape_numel(shape) == static_cast<int64_t>(values.size()), "from_vector: ", values.size(),
                " values do not fill shape ", shape);
  Tensor t = make_tensor(shape, DTypeOf<T>::value);
  T* out = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];  // std::vector<bool> has no data()
  return t;
}

template Tensor from_vector<float>(const std::vector<float>&);
template Tensor from_vector<double>(const std::vector<double>&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&);
template Tensor from_vector<bool>(const std::vector<bool>&);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&);
template Tensor from_vector<float>(const std::vector<float>&, const Shape&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, const Shape&);

}  // namespace minidet
