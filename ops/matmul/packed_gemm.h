// minidet's own float32 GEMM for the CPU, in the layered loops of Goto's algorithm:
//
//   C = alpha * op(A) op(B) + beta * C,   op(A) (m, k), op(B) (k, n), C (m, n) row-major,
//   op(X) = X or X^T as stored.
//
// A core's peak is its fused multiply-adds per cycle, but one FMA needs two operands from memory, and
// memory feeds far fewer than that. So C is computed in register tiles of kMr x kNr elements (the micro-
// kernel): for each step p of the sum over k it loads kNr values of B's row p as vectors, broadcasts kMr
// values of A's column p, and does kMr * kNr / width FMAs into accumulators that stay in registers all
// along k. Around it, three loops cut the operands so that what the micro-kernel reads comes from a close
// cache:
//
//   for each block of kNc columns of C                   (B's kc x nc block lives in L3)
//     for each block of kc steps of k: pack B's block    (kc x kNc, into panels kNr wide)
//       for each block of kMc rows: pack A's block       (kMc x kc, into panels kMr tall; lives in L2)
//         for each kNr-wide panel of B                   (kc x kNr, lives in L1)
//           for each kMr-tall panel of A: micro-kernel   (a kMr x kNr tile of C)
//
// Packing copies each block once into the exact order the micro-kernel reads it, so every load is
// contiguous whatever the operands' strides or transposes, and a tile at the edge of C reads zeros past it.
// A B that is never stored (row_source.h: a convolution's columns) is packed from the rows its source makes,
// so the matrix itself never exists in memory: an implicit GEMM.
//
// k is cut into the fewest blocks of at most kKc steps, all of one length kc (the last may be shorter): a
// block much shorter than the others would spend more time storing its tiles than summing them.
//
// The bits. Every element of C is the same computation wherever its tile falls: a sum over each block of
// kc steps of k in order (one FMA per step, from zero), and these block sums added to C in order of k. The
// blocks depend on k alone, so the result does not depend on the number of threads or on how callers cut C
// among them.
//
// Where it serves. gemm_cpu.cpp runs every float32 product here (float64 goes to Eigen). The tile is 6 x 16
// with AVX2's 16 registers of 8 floats and 8 x 32 with AVX-512's 32 registers of 16; an operand read across
// its lines is packed through 8 x 8 transposes in registers. At the detector's products it ran faster than
// Eigen's GEMM on AMD EPYCs (with AVX2 and with AVX-512) and on par with it on a Xeon with AVX-512, so one GEMM
// serves them all (bench/bench_gemm.cpp measures both; docs/benchmarks.md has the numbers).
//
// Sources: K. Goto and R. van de Geijn, "Anatomy of High-Performance Matrix Multiplication", ACM TOMS 34(3),
// 2008; F. Van Zee and R. van de Geijn, "BLIS: A Framework for Rapidly Instantiating BLAS Functionality", ACM
// TOMS 41(3), 2015 (the five loops and the micro-kernel around which they are built).
#pragma once

#include <cstdint>

#include "ops/matmul/row_source.h"

namespace minidet::ops::detail {

// One operand as stored: element (r, c) of op(X) is data[r * ld + c], or data[c * ld + r] when transposed. Or,
// for B only, one never stored: element (r, c) of X is source's S(row0 + r, col0 + c), and packing asks the
// source for the rows it needs (row_source.h).
struct PackedGemmOperand {
  const float* data;
  int64_t ld;
  bool transposed;
  const RowSource* source = nullptr;
  int64_t row0 = 0, col0 = 0;
};

// C (m x n, row stride ldc) = alpha * op(A) op(B) + beta * C. beta == 0 never reads C (garbage or NaN in it
// does not leak through 0 * NaN). k == 0 gives beta * C. Serial: callers share the work among threads by
// cutting C into blocks.
void packed_gemm(int64_t m, int64_t n, int64_t k, const PackedGemmOperand& a, const PackedGemmOperand& b, float* c,
                 int64_t ldc, float alpha, float beta);

// The register tile's height and width (rows of A broadcast, columns of B as vectors) on this build's CPU:
// callers that cut C among threads cut at multiples of them, so that no cut makes a partial tile.
int64_t packed_gemm_tile_rows();
int64_t packed_gemm_tile_cols();

}  // namespace minidet::ops::detail
