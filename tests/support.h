// Helpers shared by the tests: CUDA case declaration, tensor comparison, error-message checks.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "core/cuda/availability.h"
#include "core/error.h"
#include "core/tensor.h"

namespace minidet::test {

// Asked once, at registration time, so doctest can mark CUDA cases as skipped before running anything.
bool cuda_available();

// The L2 cache of the current GPU, in bytes, for cases that size an input to outgrow it; 0 in a CPU-only
// build, which never runs the cuda/ cases that ask.
int64_t gpu_l2_bytes();

// A float64 leaf drawn from N(0, 1) with its own seed, marked requires_grad: the usual gradcheck input.
Tensor random_leaf(const Shape& shape, uint64_t seed);

// Largest |a - b| over all elements (both converted to float64 on the host). Shapes must match.
double max_abs_diff(const Tensor& a, const Tensor& b);
// Bit-for-bit equality of two tensors of one shape and dtype (NaN equals a NaN of the same bits); on
// failure, prints the first difference.
bool same_bits(const Tensor& a, const Tensor& b);
// max |a - b| <= atol + rtol * |b| elementwise; on failure, prints the worst element.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace minidet::test

// A test case that needs a GPU. Without one it is reported as skipped, never as passed.
#define MINIDET_CUDA_TEST_CASE(name) TEST_CASE(name * doctest::skip(!::minidet::test::cuda_available()))

// Checks that `expr` throws minidet::Error whose message contains `fragment`.
#define CHECK_THROWS_CONTAINING(expr, fragment)                                                    \
  do {                                                                                             \
    bool minidet_threw_ = false;                                                                   \
    try {                                                                                          \
      (void)(expr);                                                                                \
    } catch (const ::minidet::Error& e) {                                                          \
      minidet_threw_ = true;                                                                       \
      const std::string minidet_message_ = e.what(); /* INFO is lazy: keep a copy */       \
      INFO("message: " << minidet_message_);                                                       \
      CHECK(minidet_message_.find(fragment) != std::string::npos);                                 \
    }                                                                                              \
    CHECK_MESSAGE(minidet_threw_, "expected minidet::Error from: " #expr);                         \
  } while (0)
