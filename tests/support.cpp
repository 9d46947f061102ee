#include "tests/support.h"

#include <cmath>
#include <cstring>

#include "core/factories.h"
#if MINIDET_WITH_CUDA
#include "core/cuda/context.h"  // cuda::l2_cache_bytes
#endif

namespace minidet::test {

bool cuda_available() {
  static const bool available = cuda::is_available();
  return available;
}

int64_t gpu_l2_bytes() {
#if MINIDET_WITH_CUDA
  return cuda::l2_cache_bytes();
#else
  return 0;
#endif
}

Tensor random_leaf(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  Tensor t = randn(shape, kFloat64, &g);
  t.requires_grad_();
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  REQUIRE(a.dtype() == b.dtype());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();  // exact for float32 too
  for (size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0) {
      MESSAGE("first difference at " << i << ": " << x[i] << " vs " << y[i] << " (of " << x.size() << ")");
      return false;
    }
  return true;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.sizes() != b.sizes()) {
    MESSAGE("shape mismatch: " << detail::compose(a.sizes()) << " vs " << detail::compose(b.sizes()));
    return false;
  }
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    const bool both_nan = std::isnan(x[i]) && std::isnan(y[i]);
    if (!both_nan && !(std::fabs(x[i] - y[i]) <= atol + rtol * std::fabs(y[i]))) {
      MESSAGE("element " << i << ": " << x[i] << " vs " << y[i] << " (|diff| " << std::fabs(x[i] - y[i]) << ")");
      return false;
    }
  }
  return true;
}

}  // namespace minidet::test
