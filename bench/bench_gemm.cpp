// The CPU's float32 GEMM (ops/matmul/packed_gemm.h) at the largest products of a CPU training step of the
// tiny detector at batch 8, against Eigen's GEMM compiled for the same CPU and against the core's FMA peak.
//
//   bench_gemm [--json PATH] [--cpu-reps N] [--threads N]
//
// Rows: batch x (m x n x k) and the operands' layouts (N: as stored, T: a transposed view): the convolutions'
// forward (weights x columns, batched over images when the columns of several fit one chunk), their input
// gradient (weights^T x dY) and weight gradient (dY x columns^T), and the box head's fully connected layers.
// Columns, median of --cpu-reps: minidet's ops::gemm on one thread and on --threads (default: OpenMP's),
// Eigen's GEMM on one thread (the product's batch in a loop), and GFLOP/s as a share of one core's peak,
// measured here by a loop of independent FMAs. bench/gemm_torch.py times torch.matmul on the same shapes and
// threads and prints the ratios. Never asserted.
#include <omp.h>

#include <Eigen/Core>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/factories.h"
#include "ops/matmul/gemm.h"
#include "ops/shape/views.h"

using namespace minidet;
using namespace minidet::bench;

namespace {

struct GemmShape {
  int64_t batch, m, n, k;
  bool a_t, b_t;
  std::string label() const {
    char s[64];
    std::snprintf(s, sizeof s, "b%lld %lldx%lldx%lld %c%c", (long long)batch, (long long)m, (long long)n, (long long)k,
                  a_t ? 'T' : 'N', b_t ? 'T' : 'N');
    return s;
  }
  double flops() const { return 2.0 * batch * m * n * k; }
};

// From a count of one CPU training step's products by their time (the largest first).
const std::vector<GemmShape> kShapes = {
    {8, 128, 256, 1152, false, false},   // conv 128 -> 128 at 16x16, forward
    {3, 32, 4096, 288, false, false},    // conv 32 -> 32 at 64x64, forward, three images per column chunk
    {1, 1024, 6272, 256, false, false},  // the box head's first layer, input gradient
    {1, 256, 6272, 1024, true, false},   // the box head's first layer, weight gradient
    {1, 1024, 256, 6272, false, true},   // the box head's first layer, forward
    {1, 128, 1152, 2048, false, true},   // conv 128 -> 128, weight gradient
    {8, 1152, 256, 128, true, false},    // conv 128 -> 128, input gradient (columns)
    {1, 32, 288, 12288, false, true},    // conv 32 -> 32, weight gradient
    {8, 64, 1024, 288, false, false},    // conv 32 -> 64 at 32x32, forward
    {3, 288, 4096, 32, true, false},     // conv 32 -> 32, input gradient (columns)
    {8, 32, 4096, 27, false, false},     // the stem, 3 -> 32 at 64x64, forward
};

// An operand of the product: (batch, rows, cols) as gemm reads it, a transposed view of stored data when `t`.
Tensor operand(int64_t batch, int64_t rows, int64_t cols, bool t, Generator* g) {
  return t ? transpose(randn({batch, cols, rows}, kFloat32, g), 1, 2) : randn({batch, rows, cols}, kFloat32, g);
}

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;

// Eigen's GEMM on the same stored data, one product at a time.
void eigen_product(const GemmShape& s, const float* a, const float* b, float* c) {
  for (int64_t i = 0; i < s.batch; ++i) {
    const ConstMap A(a + i * s.m * s.k, s.a_t ? s.k : s.m, s.a_t ? s.m : s.k);
    const ConstMap B(b + i * s.k * s.n, s.b_t ? s.n : s.k, s.b_t ? s.k : s.n);
    Eigen::Map<RowMajor> C(c + i * s.m * s.n, s.m, s.n);
    if (!s.a_t && !s.b_t)
      C.noalias() = A * B;
    else if (s.a_t && !s.b_t)
      C.noalias() = A.transpose() * B;
    else if (!s.a_t && s.b_t)
      C.noalias() = A * B.transpose();
    else
      C.noalias() = A.transpose() * B.transpose();
  }
}

// One core's float32 FMA peak: 12 independent chains of vector FMAs (enough to cover the FMA latency on two
// pipes), GFLOP/s. The file is compiled for this CPU (bench/CMakeLists.txt), so the vectors are its widest.
double fma_peak_gflops() {
#if defined(__AVX512F__)
  constexpr int kWidth = 16;
#elif defined(__AVX__)
  constexpr int kWidth = 8;
#else
  constexpr int kWidth = 4;
#endif
  typedef float Vec __attribute__((vector_size(kWidth * sizeof(float))));
  const int64_t iterations = 20'000'000;
  volatile float sink = 0.0f;
  const double ms = time_cpu_ms(
      [&] {
        Vec acc[12];  // local, so that the twelve chains live in registers
        for (int i = 0; i < 12; ++i) acc[i] = Vec{} + 0.001f * static_cast<float>(i);
        const Vec scale = Vec{} + 0.9999f, shift = Vec{} + 0.0001f;
        for (int64_t it = 0; it < iterations; ++it)
          for (int i = 0; i < 12; ++i) acc[i] = acc[i] * scale + shift;
        float total = 0.0f;
        for (int i = 0; i < 12; ++i) total += acc[i][0];
        sink = total;  // the result is used, so the loop stays
      },
      3);
  (void)sink;
  return iterations * 12.0 * kWidth * 2.0 / (ms * 1e6);
}

void run_cpu(int reps, int threads) {
  const double peak = fma_peak_gflops();
  std::printf("\n== CPU float32 GEMM, median of %d runs; one core's FMA peak %.1f GFLOP/s ==\n", reps, peak);
  emit("gemm", "cpu", "fma peak, one core", "peak", 0.0, gflops_field(peak));
  std::printf("%-28s %-12s %10s %10s %8s\n", "product", "impl", "median_ms", "GFLOP/s", "of peak");
  Eigen::setNbThreads(1);
  for (const GemmShape& s : kShapes) {
    Generator g(1);
    const Tensor a = operand(s.batch, s.m, s.k, s.a_t, &g), b = operand(s.batch, s.k, s.n, s.b_t, &g);
    const Tensor c = empty({s.batch, s.m, s.n});
    const float* a_data = (s.a_t ? transpose(a, 1, 2) : a).data<float>();
    const float* b_data = (s.b_t ? transpose(b, 1, 2) : b).data<float>();
    struct Impl {
      std::string name;
      int threads;
      std::function<void()> fn;
    };
    const std::vector<Impl> impls = {
        {"minidet-1t", 1, [&] { ops::gemm_batched(a, b, c); }},
        {"minidet-" + std::to_string(threads) + "t", threads, [&] { ops::gemm_batched(a, b, c); }},
        {"eigen-1t", 1, [&] { eigen_product(s, a_data, b_data, c.data<float>()); }},
    };
    for (const Impl& impl : impls) {
      omp_set_num_threads(impl.threads);
      const double ms = time_cpu_ms(impl.fn, reps);
      const double gflops = s.flops() / (ms * 1e6);
      std::printf("%-28s %-12s %10.3f %10.1f %7.0f%%\n", s.label().c_str(), impl.name.c_str(), ms, gflops,
                  100.0 * gflops / (peak * impl.threads));
      emit("gemm", "cpu", s.label(), impl.name, ms, gflops_field(gflops));
    }
  }
  omp_set_num_threads(threads);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = omp_get_max_threads();
  const Args args = parse_args(
      argc, argv, 5,
      [&](int argc, char** argv, int& i) {
        if (std::string(argv[i]) != "--threads" || i + 1 >= argc) return false;
        threads = std::max(1, std::atoi(argv[++i]));
        return true;
      },
      "[--threads N]");
  if (!args.skip_cpu) run_cpu(args.cpu_reps, threads);  // a CPU benchmark: no GPU part
  return 0;
}
