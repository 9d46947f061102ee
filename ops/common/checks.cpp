#include "ops/common/checks.h"

#include <cmath>

namespace minidet::ops {

void check_defined(const char* op, const Tensor& t, const char* arg) {
  MINIDET_CHECK(t.defined(), op, ": ", arg, " is an undefined tensor");
}

void check_same_device(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  MINIDET_CHECK(a.device() == b.device(), op, ": expected ", a_name, " and ", b_name,
                " on the same device, got ", a.device(), " and ", b.device());
}

void check_same_dtype(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  MINIDET_CHECK(a.dtype() == b.dtype(), op, ": expected ", a_name, " and ", b_name, " of the same dtype, got ",
                a.dtype(), " and ", b.dtype());
}

void check_floating(const char* op, const Tensor& t, const char* arg) {
  MINIDET_CHECK(is_floating(t.dtype()), op, ": expected ", arg, " to be float32 or float64, got ", t.dtype());
}

void check_dim(const char* op, const Tensor& t, const char* arg, int64_t expected_dim) {
  MINIDET_CHECK(t.dim() == expected_dim, op, ": expected ", arg, " with ", expected_dim, " dims, got shape ",
                t.sizes());
}

void check_finite(const char* op, const Tensor& t, const char* arg) {
  if (!is_floating(t.dtype())) return;
  const std::vector<double> values = t.to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i)
    MINIDET_CHECK(std::isfinite(values[i]), op, ": ", arg, " contains ", values[i], " at flat index ", i,
                  "; expected finite values");
}

}  // namespace minidet::ops
