// conv2d benchmark at the shapes of a small backbone (float32), forward and forward+backward.
//
//   bench_conv2d [--json PATH] [--cpu-reps N] [--gpu-reps N] [--skip-cpu] [--skip-gpu]
//
// CPU: std::chrono::steady_clock, median of a few repetitions, GFLOP/s next to the CPU GEMM's own GFLOP/s
//      (ops::gemm at 1024^3 and the per-image im2col GEMM shapes) on the same machine: the ceiling the
//      lowering can reach.
// GPU: CUDA events around each repetition after a warm-up, median of >= 50. minidet runs FP32 through
//      cuBLAS without TF32; bench/conv2d_torch.py times PyTorch (cuDNN) on the same shapes and, given this
//      program's JSON file, prints the ratio.
// GFLOP/s counts 2 * N * C_out * H_out * W_out * (C_in / groups) * kh * kw per forward, and 3x that for
// forward+backward (dX and dW are each one more GEMM of the same size).
// Output: a table, and one JSON line per measurement (stdout, and PATH when given). Never asserted.
#include <omp.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/factories.h"
#include "ops/conv2d/conv2d.h"
#include "ops/elementwise/binary.h"
#include "ops/matmul/gemm.h"

using namespace minidet;
using bench::emit;
using bench::gflops_field;
using bench::time_cpu_ms;

namespace {

struct BenchShape {
  int64_t n, c_in, h, w, c_out, kernel, stride, pad;
  std::string label() const {
    char s[96];
    std::snprintf(s, sizeof s, "(%lld,%lld,%lld,%lld)->%lld k%lld s%lld", (long long)n, (long long)c_in,
                  (long long)h, (long long)w, (long long)c_out, (long long)kernel, (long long)stride);
    return s;
  }
  int64_t out_h() const { return (h + 2 * pad - kernel) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - kernel) / stride + 1; }
  double forward_flops() const { return 2.0 * n * c_out * out_h() * out_w() * c_in * kernel * kernel; }
};

const std::vector<BenchShape> kShapes = {
    {8, 3, 128, 128, 32, 3, 2, 1},
    {8, 32, 64, 64, 64, 3, 2, 1},
    {8, 64, 32, 32, 128, 3, 2, 1},
    {8, 128, 16, 16, 128, 3, 1, 1},
};

// One conv2d forward, or forward+backward through the autograd graph, on tensors already on `device`.
struct ConvRun {
  Tensor x, w, b, grad;
  Conv2dOptions options;
  ConvRun(const BenchShape& s, const Device& device) {
    Generator g(1);
    const TensorOptions o(kFloat32, device);
    x = randn({s.n, s.c_in, s.h, s.w}, kFloat32, &g).to(o).requires_grad_();
    w = (randn({s.c_out, s.c_in, s.kernel, s.kernel}, kFloat32, &g) * 0.1).to(o).requires_grad_();
    b = randn({s.c_out}, kFloat32, &g).to(o).requires_grad_();
    grad = randn({s.n, s.c_out, s.out_h(), s.out_w()}, kFloat32, &g).to(o);
    options = Conv2dOptions().set_stride(s.stride).set_padding(s.pad);
  }
  void forward() {
    NoGradGuard inference;
    (void)conv2d(x, w, b, options);
  }
  void forward_backward() {
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    conv2d(x, w, b, options).backward(grad);
  }
};

double cpu_gemm_ms(int64_t m, int64_t k, int64_t n, int reps) {
  Generator g(1);
  const Tensor a = randn({m, k}, kFloat32, &g), b = randn({k, n}, kFloat32, &g), c = empty({m, n});
  return time_cpu_ms([&] { ops::gemm(a, b, c); }, reps);
}

void run_cpu(int reps) {
  std::printf("\n== CPU (%d OpenMP threads), median of %d runs ==\n", omp_get_max_threads(), reps);
  std::printf("%-34s %-8s %10s %10s\n", "shape", "pass", "median_ms", "GFLOP/s");
  for (const BenchShape& s : kShapes) {
    ConvRun run(s, Device::cpu());
    for (int pass = 0; pass < 2; ++pass) {
      const double ms = time_cpu_ms([&] { pass ? run.forward_backward() : run.forward(); }, reps);
      const double gflops = s.forward_flops() * (pass ? 3 : 1) / (ms * 1e6);
      const char* name = pass ? "fwd+bwd" : "fwd";
      std::printf("%-34s %-8s %10.3f %10.2f\n", s.label().c_str(), name, ms, gflops);
      emit("conv2d", "cpu", s.label(), name, ms, gflops_field(gflops));
    }
  }
  std::printf("\nThe CPU GEMM's ceiling (ops::gemm, float32, C = A B), median of %d runs:\n", reps);
  std::printf("%-34s %10s %10s\n", "m x k x n", "median_ms", "GFLOP/s");
  std::vector<std::array<int64_t, 3>> gemms = {{1024, 1024, 1024}};
  for (const BenchShape& s : kShapes) gemms.push_back({s.c_out, s.c_in * s.kernel * s.kernel, s.out_h() * s.out_w()});
  for (const auto& g : gemms) {
    const double ms = cpu_gemm_ms(g[0], g[1], g[2], g[0] == 1024 ? 3 : 4 * reps);
    const double gflops = 2.0 * g[0] * g[1] * g[2] / (ms * 1e6);
    char label[64];
    std::snprintf(label, sizeof label, "%lldx%lldx%lld", (long long)g[0], (long long)g[1], (long long)g[2]);
    std::printf("%-34s %10.3f %10.2f\n", label, ms, gflops);
    emit("cpu_gemm", "cpu", label, "gemm", ms, gflops_field(gflops));
  }
}

void run_gpu(const std::string& device, int reps) {
  std::printf("\n== GPU %s (FP32 via cuBLAS, no TF32), CUDA events, median of %d runs after 10 warm-up ==\n",
              device.c_str(), reps);
  std::printf("%-34s %-8s %10s %10s\n", "shape", "pass", "median_ms", "GFLOP/s");
  for (const BenchShape& s : kShapes) {
    ConvRun run(s, Device::cuda());
    for (int pass = 0; pass < 2; ++pass) {
      const double med = bench::time_gpu_ms([&] { pass ? run.forward_backward() : run.forward(); }, reps);
      const double gflops = s.forward_flops() * (pass ? 3 : 1) / (med * 1e6);
      const char* name = pass ? "fwd+bwd" : "fwd";
      std::printf("%-34s %-8s %10.4f %10.1f\n", s.label().c_str(), name, med, gflops);
      emit("conv2d", device, s.label(), name, med, gflops_field(gflops));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Args args = bench::parse_args(argc, argv);
  return bench::run(
      args, [&] { run_cpu(args.cpu_reps); }, [&](const std::string& device) { run_gpu(device, args.gpu_reps); });
}
