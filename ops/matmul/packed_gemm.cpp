// The packed float GEMM of packed_gemm.h. ops/CMakeLists.txt compiles this file for the build machine's CPU
// and lets the compiler contract a * b + c into one FMA, so the micro-kernel below becomes the vector FMAs
// of whatever the CPU has: AVX-512, AVX2 with FMA, or SSE.
#include "ops/matmul/packed_gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace minidet::ops::detail {
namespace {

// The register tile: kMr rows of A times kVecs vectors of B's row. Its accumulators, the kVecs vectors of B
// and the broadcast value of A must all fit in the vector registers, or the compiler spills them to memory
// inside the innermost loop.
#if defined(__AVX512F__)
constexpr int kWidth = 16;  // floats per vector; 32 registers: 8 x 2 accumulators + 2 + 1
constexpr int kMr = 8;      // the detector's channel counts are multiples of 8, so no tile is cut short
#elif defined(__AVX__)
constexpr int kWidth = 8;  // 16 registers: 6 x 2 accumulators + 2 + 1
constexpr int kMr = 6;
#else
constexpr int kWidth = 4;  // SSE2's 16 registers (and NEON's 32)
constexpr int kMr = 6;
#endif
constexpr int kVecs = 2;
constexpr int kNr = kVecs * kWidth;

// The cache blocks (packed_gemm.h's loops). kKc x kNr floats of B (16 KiB with AVX2, 32 KiB with AVX-512) stay
// in L1 while the micro-kernel runs down a kMc x kKc block of A (96 KiB) from L2; kKc x kNc of B (4 MiB) is
// read from L3. k is cut into blocks of one length, at most kKc (k = 288: two of 144, not 256 and a short 32).
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

// out = lanes I of the 16 that a and b hold together (b's are 8 to 15). GCC spells it __builtin_shuffle with a
// mask vector (__builtin_shufflevector only from GCC 12), Clang __builtin_shufflevector. The vectors go by
// reference: a 32-byte vector by value has another ABI with AVX than without, which GCC warns of.
typedef float Vec8 __attribute__((vector_size(8 * sizeof(float))));
template <int... I>
inline void shuffle(const Vec8& a, const Vec8& b, Vec8& out) {
  static_assert(sizeof...(I) == 8, "one lane index per lane");
#if defined(__clang__)
  out = __builtin_shufflevector(a, b, I...);
#else
  typedef int Mask8 __attribute__((vector_size(8 * sizeof(int))));
  out = __builtin_shuffle(a, b, Mask8{I...});
#endif
}

// The 8 x 8 block at src (rows ld apart) written transposed at dst (rows ld_out apart): dst[j * ld_out + i] =
// src[i * ld + j]. Three rounds of shuffles, each interleaving pairs of rows at a coarser grain (single floats,
// pairs, halves), turn 8 row loads into 8 column stores: packing an operand that is read across its rows then
// costs vector moves instead of one scalar load and store per element.
inline void transpose_8x8(const float* src, int64_t ld, float* dst, int64_t ld_out) {
  Vec8 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) std::memcpy(&r[i], src + i * ld, sizeof(Vec8));
  for (int i = 0; i < 8; i += 2) {  // t[i]: rows i and i+1 alternating, columns 0 1 4 5; t[i+1]: 2 3 6 7
    shuffle<0, 8, 1, 9, 4, 12, 5, 13>(r[i], r[i + 1], t[i]);
    shuffle<2, 10, 3, 11, 6, 14, 7, 15>(r[i], r[i + 1], t[i + 1]);
  }
  for (int i = 0; i < 8; i += 4)  // u: four rows' values of one column (and of the column four to its right)
    for (int h = 0; h < 2; ++h) {
      shuffle<0, 1, 8, 9, 4, 5, 12, 13>(t[i + h], t[i + h + 2], u[i + 2 * h]);
      shuffle<2, 3, 10, 11, 6, 7, 14, 15>(t[i + h], t[i + h + 2], u[i + 2 * h + 1]);
    }
  for (int j = 0; j < 4; ++j) {  // column j from rows 0-3 and rows 4-7, and column j + 4 likewise
    Vec8 low, high;
    shuffle<0, 1, 2, 3, 8, 9, 10, 11>(u[j], u[j + 4], low);
    shuffle<4, 5, 6, 7, 12, 13, 14, 15>(u[j], u[j + 4], high);
    std::memcpy(dst + j * ld_out, &low, sizeof(Vec8));
    std::memcpy(dst + (j + 4) * ld_out, &high, sizeof(Vec8));
  }
}

// One step of k across every panel: the values of lines [0, count) at src (contiguous) go to out[q * kc + l]
// for line q + l; lines past count are zeros.
template <int64_t tile>
void pack_step(const float* src, int64_t count, int64_t kc, float* out) {
  int64_t q = 0;
  for (; q + tile <= count; q += tile)  // a whole panel's step: a copy of fixed size, a few vector moves
    std::memcpy(out + q * kc, src + q, tile * sizeof(float));
  if (q < count) {  // the last panel's: its lines past count are zeros
    float* dst = out + q * kc;
    std::memcpy(dst, src + q, (count - q) * sizeof(float));
    std::fill(dst + (count - q), dst + tile, 0.0f);
  }
}

// A block of an operand, in panels of `tile` lines for the micro-kernel. A line runs along k: a row of A or a
// column of B. Lines [l0, l0 + count) and steps [p0, p0 + kc) go to panels of `tile` lines each: the panel
// that starts at line q holds step p's `tile` values at out[q * kc + p * tile]. Lines past count are zeros,
// so an edge tile computes zeros there. `along_k`: a line's steps are contiguous (data[line * ld + step]);
// else a step's lines are (data[step * ld + line]). Either way the loops read memory in order.
template <int64_t tile>
void pack(const float* data, int64_t ld, bool along_k, int64_t l0, int64_t count, int64_t p0, int64_t kc, float* out) {
  if (along_k) {
    for (int64_t q = 0; q < count; q += tile) {
      int64_t l = 0;
      if constexpr (tile % 8 == 0) {  // whole groups of 8 lines, 8 steps at a time, through registers
        for (; l + 8 <= std::min<int64_t>(tile, count - q); l += 8) {
          const float* src = data + (l0 + q + l) * ld + p0;
          float* dst = out + q * kc + l;
          int64_t p = 0;
          for (; p + 8 <= kc; p += 8) transpose_8x8(src + p, ld, dst + p * tile, tile);
          for (; p < kc; ++p)
            for (int64_t i = 0; i < 8; ++i) dst[p * tile + i] = src[i * ld + p];
        }
      }
      for (; l < tile; ++l) {
        float* dst = out + q * kc + l;
        if (q + l >= count) {
          for (int64_t p = 0; p < kc; ++p) dst[p * tile] = 0.0f;
          continue;
        }
        const float* src = data + (l0 + q + l) * ld + p0;
        for (int64_t p = 0; p < kc; ++p) dst[p * tile] = src[p];
      }
    }
    return;
  }
  for (int64_t p = 0; p < kc; ++p) pack_step<tile>(data + (p0 + p) * ld + l0, count, kc, out + p * tile);
}

// Each thread's packing buffers, kept between calls.
float* buffer(std::vector<float>& v, size_t size) {
  if (v.size() < size) v.resize(size);
  return v.data();
}

// op(A)'s rows [i0, i0 + mc) and op(B)'s columns [j0, j0 + nc), over steps [p0, p0 + kc). A row of A is
// contiguous along k when A is stored as is, a column of B when B is stored transposed.
void pack_a(const PackedGemmOperand& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* out) {
  pack<kMr>(a.data, a.ld, !a.transposed, i0, mc, p0, kc, out);
}
void pack_b(const PackedGemmOperand& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out) {
  if (!b.source) return pack<kNr>(b.data, b.ld, b.transposed, j0, nc, p0, kc, out);
  // B never stored: the same panels, from the rows of S that the source makes (each still in L1 when packed).
  thread_local std::vector<float> rows;
  if (!b.transposed) {  // step p is row p of S, its lines S's columns: one segment per step
    float* row = buffer(rows, static_cast<size_t>(nc));
    for (int64_t p = 0; p < kc; ++p) {
      b.source->row(b.row0 + p0 + p, b.col0 + j0, nc, row);
      pack_step<kNr>(row, nc, kc, out + p * kNr);
    }
    return;
  }
  // Transposed, a line is a row of S, its steps S's columns: a panel's kNr lines at a time, then packed as
  // stored lines (ld kc) are.
  float* lines = buffer(rows, static_cast<size_t>(kNr * kc));
  for (int64_t q = 0; q < nc; q += kNr) {
    const int64_t count = std::min<int64_t>(kNr, nc - q);
    for (int64_t l = 0; l < count; ++l) b.source->row(b.row0 + j0 + q + l, b.col0 + p0, kc, lines + l * kc);
    pack<kNr>(lines, kc, true, 0, count, 0, kc, out + q * kc);
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
  // The loops that store the sums are unrolled like the one that makes them, so that every accumulator is
  // named by a constant index: with a loop index GCC kept the whole array in memory as well, and zeroed it on
  // the stack (a kilobyte with AVX-512) at every call.
  if (rows == kMr && cols == kNr) {
#pragma GCC unroll 16
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
#pragma GCC unroll 16
  for (int i = 0; i < kMr; ++i)
    for (int v = 0; v < kVecs; ++v)
      store(t[i] + v * kWidth, combine(sum[i][v], load(t[i] + v * kWidth), alpha, beta, first));
  for (int64_t i = 0; i < rows; ++i) std::memcpy(c + i * ldc, t[i], cols * sizeof(float));
}

}  // namespace

int64_t packed_gemm_tile_rows() { return kMr; }
int64_t packed_gemm_tile_cols() { return kNr; }

void packed_gemm(int64_t m, int64_t n, int64_t k, const PackedGemmOperand& a, const PackedGemmOperand& b, float* c,
                 int64_t ldc, float alpha, float beta) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta * C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  const int64_t k_blocks = (k + kKc - 1) / kKc, k_block = (k + k_blocks - 1) / k_blocks;
  thread_local std::vector<float> a_buffer, b_buffer;
  const int64_t nc_max = std::min(kNc, (n + kNr - 1) / kNr * kNr), mc_max = std::min(kMc, (m + kMr - 1) / kMr * kMr);
  float* packed_a = buffer(a_buffer, static_cast<size_t>(mc_max * kKc));
  float* packed_b = buffer(b_buffer, static_cast<size_t>(nc_max * kKc));
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    const int64_t nc = std::min(kNc, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += k_block) {
      const int64_t kc = std::min(k_block, k - p0);
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
