// The packed float GEMM of packed_gemm.h. ops/CMakeLists.txt compiles this file for the build machine's CPU
// and lets the compiler contract a * b + c into one FMA, so the micro-kernel below becomes the vector FMAs
// of whatever the CPU has: AVX2 with FMA, or SSE.
#include "ops/matmul/packed_gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace minidet::ops::detail {
namespace {

// The register tile: kMr rows of A times kVecs vectors of B's row. Its accumulators, the kVecs vectors of B
// and the broadcast value of A must all fit in the vector registers, or the compiler spills them to memory
// inside the innermost loop. (No AVX-512 tile: gemm_cpu.cpp leaves such CPUs to Eigen, packed_gemm.h says why.)
#if defined(__AVX__)
constexpr int kWidth = 8;  // floats per vector; 16 registers: 6 x 2 accumulators + 2 + 1
#else
constexpr int kWidth = 4;  // SSE2's 16 registers (and NEON's 32)
#endif
constexpr int kMr = 6;
constexpr int kVecs = 2;
constexpr int kNr = kVecs * kWidth;

// The cache blocks (packed_gemm.h's loops). kKc x kNr floats of B (16 KiB with AVX2) stay in L1 while the
// micro-kernel runs down a kMc x kKc block of A (96 KiB) from L2; kKc x kNc of B (4 MiB) is read from L3.
constexpr int64_t kKc = 256;
constexpr int64_t kMc = 96;  // a multiple of kMr
constexpr int64_t kNc = 4096;
static_assert(kMc % kMr == 0 && kNc % kNr == 0, "cache blocks hold whole register tiles");

// A vector of kWidth floats (GCC's and Clang's vector extension): arithmetic on it is element by element,
// and a float times a Vec broadcasts the float.
typedef float Vec __attribute__((vector_size(kWidth * sizeof(float))));

// Unaligned loads and stores, through memcpy: the compiler turns them into single vector moves.
inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// op(A)'s rows [i0, i0 + mc) and steps [p0, p0 + kc), in panels of kMr rows: panel q's step p holds its kMr
// values at out[q * kMr * kc + p * kMr]. Rows past mc are zeros, so an edge tile computes zeros there.
void pack_a(const PackedGemmOperand& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* out) {
  for (int64_t q = 0; q < mc; q += kMr, out += kMr * kc) {
    const int64_t rows = std::min<int64_t>(kMr, mc - q);
    if (a.transposed) {  // the panel's kMr values of one step are contiguous
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = a.data + (p0 + p) * a.ld + i0 + q;
        for (int64_t r = 0; r < kMr; ++r) out[p * kMr + r] = r < rows ? src[r] : 0.0f;
      }
    } else {  // a row's steps are contiguous: read along them
      for (int64_t r = 0; r < kMr; ++r) {
        if (r >= rows) {
          for (int64_t p = 0; p < kc; ++p) out[p * kMr + r] = 0.0f;
          continue;
        }
        const float* src = a.data + (i0 + q + r) * a.ld + p0;
        for (int64_t p = 0; p < kc; ++p) out[p * kMr + r] = src[p];
      }
    }
  }
}

// op(B)'s steps [p0, p0 + kc) and columns [j0, j0 + nc), in panels of kNr columns: panel q's step p holds its
// kNr values at out[q * kNr * kc + p * kNr]. Columns past nc are zeros.
void pack_b(const PackedGemmOperand& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out) {
  if (!b.transposed) {  // a step's values are contiguous: read along the whole row of the block
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b.data + (p0 + p) * b.ld + j0;
      for (int64_t q = 0; q < nc; q += kNr) {
        const int64_t cols = std::min<int64_t>(kNr, nc - q);
        float* dst = out + q * kc + p * kNr;
        std::memcpy(dst, src + q, cols * sizeof(float));
        std::fill(dst + cols, dst + kNr, 0.0f);
      }
    }
    return;
  }
  for (int64_t q = 0; q < nc; q += kNr, out += kNr * kc) {  // a column's steps are contiguous: read along them
    const int64_t cols = std::min<int64_t>(kNr, nc - q);
    for (int64_t c = 0; c < kNr; ++c) {
      if (c >= cols) {
        for (int64_t p = 0; p < kc; ++p) out[p * kNr + c] = 0.0f;
        continue;
      }
      const float* src = b.data + (j0 + q + c) * b.ld + p0;
      for (int64_t p = 0; p < kc; ++p) out[p * kNr + c] = src[p];
    }
  }
}

// What one block of steps adds to an element of C: the first block sets it (alpha * sum + beta * C, without
// reading C when beta is 0), the later ones add alpha * sum to it.
inline Vec combine(Vec sum, Vec c, float alpha, float beta, bool first) {
  if (!first) return c + alpha * sum;
  if (beta == 0.0f) return alpha * sum;
  return alpha * sum + beta * c;
}

// The micro-kernel: the kMr x kNr tile of C at c (rows x cols of it inside C) from a packed panel of A and one
// of B, over kc steps.
void tile(int64_t kc, const float* __restrict a, const float* __restrict b, float* c, int64_t ldc, int64_t rows,
          int64_t cols, float alpha, float beta, bool first) {
  Vec sum[kMr][kVecs] = {};
  for (int64_t p = 0; p < kc; ++p) {
    Vec bv[kVecs];
    for (int v = 0; v < kVecs; ++v) bv[v] = load(b + p * kNr + v * kWidth);
#pragma GCC unroll 16
    for (int i = 0; i < kMr; ++i) {
      const float ai = a[p * kMr + i];
      for (int v = 0; v < kVecs; ++v) sum[i][v] += ai * bv[v];  // one FMA each
    }
  }
  if (rows == kMr && cols == kNr) {
    for (int i = 0; i < kMr; ++i)
      for (int v = 0; v < kVecs; ++v) {
        float* at = c + i * ldc + v * kWidth;
        store(at, combine(sum[i][v], first && beta == 0.0f ? Vec{} : load(at), alpha, beta, first));
      }
    return;
  }
  // An edge tile goes through a full-size copy, so that its elements take exactly the arithmetic above.
  float t[kMr][kNr] = {};
  const bool reads_c = !first || beta != 0.0f;
  for (int64_t i = 0; i < rows && reads_c; ++i) std::memcpy(t[i], c + i * ldc, cols * sizeof(float));
  for (int i = 0; i < kMr; ++i)
    for (int v = 0; v < kVecs; ++v)
      store(t[i] + v * kWidth, combine(sum[i][v], load(t[i] + v * kWidth), alpha, beta, first));
  for (int64_t i = 0; i < rows; ++i) std::memcpy(c + i * ldc, t[i], cols * sizeof(float));
}

// Each thread's packing buffers, kept between calls.
float* buffer(std::vector<float>& v, size_t size) {
  if (v.size() < size) v.resize(size);
  return v.data();
}

}  // namespace

int64_t packed_gemm_tile_rows() { return kMr; }
int64_t packed_gemm_tile_cols() { return kNr; }

bool packed_gemm_serves_float32() {
#if defined(__AVX512F__)
  return false;
#else
  return true;
#endif
}

void packed_gemm(int64_t m, int64_t n, int64_t k, const PackedGemmOperand& a, const PackedGemmOperand& b, float* c,
                 int64_t ldc, float alpha, float beta) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta * C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  thread_local std::vector<float> a_buffer, b_buffer;
  const int64_t nc_max = std::min(kNc, (n + kNr - 1) / kNr * kNr), mc_max = std::min(kMc, (m + kMr - 1) / kMr * kMr);
  float* packed_a = buffer(a_buffer, static_cast<size_t>(mc_max * kKc));
  float* packed_b = buffer(b_buffer, static_cast<size_t>(nc_max * kKc));
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    const int64_t nc = std::min(kNc, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t kc = std::min(kKc, k - p0);
      pack_b(b, p0, kc, j0, nc, packed_b);
      for (int64_t i0 = 0; i0 < m; i0 += kMc) {
        const int64_t mc = std::min(kMc, m - i0);
        pack_a(a, i0, mc, p0, kc, packed_a);
        for (int64_t jr = 0; jr < nc; jr += kNr)
          for (int64_t ir = 0; ir < mc; ir += kMr)
            tile(kc, packed_a + ir * kc, packed_b + jr * kc, c + (i0 + ir) * ldc + j0 + jr, ldc,
                 std::min<int64_t>(kMr, mc - ir), std::min<int64_t>(kNr, nc - jr), alpha, beta, p0 == 0);
      }
    }
  }
}

}  // namespace minidet::ops::detail
