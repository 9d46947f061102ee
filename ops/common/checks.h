// Input validation shared by every op's public function. Each check names the op and says what it
// expected and what it got, so a user who passes a wrong tensor learns which argument and why.
#pragma once

#include <string>

#include "core/tensor.h"

namespace minidet::ops {

void check_defined(const char* op, const Tensor& t, const char* arg);
void check_same_device(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name);
void check_same_dtype(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name);
void check_floating(const char* op, const Tensor& t, const char* arg);
void check_dim(const char* op, const Tensor& t, const char* arg, int64_t expected_dim);
// Values a kernel would index with: no NaN or Inf in a floating tensor (copies to the host to look).
void check_finite(const char* op, const Tensor& t, const char* arg);

}  // namespace minidet::ops
