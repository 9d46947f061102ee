// An operand of a matrix product that is never stored (an implicit GEMM): the product asks for its rows, a
// segment at a time, as it packs them. A convolution's columns are one (ops/conv2d/conv2d_cpu.cpp): made
// straight from the images, they never take the memory of an im2col buffer, and each segment is packed while
// it is still in the cache.
//
// S is the matrix the source stands for, as if it were stored row-major: row(r, c0, count, out) writes
// S(r, c0), ..., S(r, c0 + count - 1) to out. Both element types, so that float64 products (gradient checks)
// read the same matrix. The GEMM's threads call row() at the same time, from inside an OpenMP region: it must
// only read shared state, and must not throw (an exception cannot leave the region). A source checks what it
// needs when it is made.
#pragma once

#include <cstdint>

namespace minidet::ops::detail {

struct RowSource {
  virtual ~RowSource() = default;
  virtual void row(int64_t r, int64_t c0, int64_t count, float* out) const = 0;
  virtual void row(int64_t r, int64_t c0, int64_t count, double* out) const = 0;
};

}  // namespace minidet::ops::detail
