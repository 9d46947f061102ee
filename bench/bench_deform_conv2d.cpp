// deform_conv2d benchmark (float32), DCNv1 (offsets) and DCNv2 (offsets and mask), forward and
// forward+backward (gradients of input, offset, weight, bias and mask), on the DESIGN.md workload and a
// detection-backbone stage.
//
//   bench_deform_conv2d [--json PATH] [--cpu-reps N] [--gpu-reps N] [--skip-cpu] [--skip-gpu]
//                       [--bench dcn_v1|dcn_v2] [--shape 0|1] [--pass NAME]
//
// --bench, --shape (an index into kShapes) and --pass keep only the rows they name, so that a profiler sees
// one combination, e.g. ncu bench_deform_conv2d --skip-cpu --bench dcn_v1 --shape 0 --pass fwd+bwd
// (scripts/gpu/profile.sh).
//
// CPU: std::chrono::steady_clock, median of a few repetitions. GPU: CUDA events around each repetition
// after a warm-up, median of >= 50; FP32 through cuBLAS without TF32. bench/deform_conv2d_torch.py times
// torchvision.ops.deform_conv2d and torch's conv2d on the same shapes and, given this program's JSON file,
// prints the ratios. Offsets are N(0, 1) (most samples land inside the map, between pixels), the mask U(0, 1).
// Output: a table, and one JSON line per measurement (stdout, and PATH when given). Never asserted.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "ops/deform_conv2d/deform_conv2d.h"
#include "ops/elementwise/binary.h"

using namespace minidet;
using bench::emit;

namespace {

struct BenchShape {
  int64_t n, c_in, h, w, c_out, kernel, pad;
  std::string label() const {
    char s[96];
    std::snprintf(s, sizeof s, "(%lld,%lld,%lld,%lld)->%lld k%lld p%lld", (long long)n, (long long)c_in,
                  (long long)h, (long long)w, (long long)c_out, (long long)kernel, (long long)pad);
    return s;
  }
  int64_t out_h() const { return h + 2 * pad - kernel + 1; }
  int64_t out_w() const { return w + 2 * pad - kernel + 1; }
};

const std::vector<BenchShape> kShapes = {
    {8, 64, 64, 64, 64, 3, 1},
    {2, 256, 50, 68, 256, 3, 1},
};

const char* kPasses[3] = {"fwd", "fwd+bwd", "fwd+bwd deterministic"};

// The rows to time: empty = all.
struct Only {
  std::string bench, shape, pass;
};
Only g_only;

// One deform_conv2d forward, or forward+backward through the autograd graph, on tensors already on `device`.
struct DeformRun {
  Tensor x, offset, mask, w, b, grad;
  DeformConv2dOptions options;
  DeformRun(const BenchShape& s, bool modulated, const Device& device) {
    Generator g(1);
    const TensorOptions o(kFloat32, device);
    const int64_t taps = s.kernel * s.kernel;
    x = randn({s.n, s.c_in, s.h, s.w}, kFloat32, &g).to(o).requires_grad_();
    offset = randn({s.n, 2 * taps, s.out_h(), s.out_w()}, kFloat32, &g).to(o).requires_grad_();
    if (modulated) mask = rand({s.n, taps, s.out_h(), s.out_w()}, kFloat32, &g).to(o).requires_grad_();
    w = (randn({s.c_out, s.c_in, s.kernel, s.kernel}, kFloat32, &g) * 0.05).to(o).requires_grad_();
    b = randn({s.c_out}, kFloat32, &g).to(o).requires_grad_();
    grad = randn({s.n, s.c_out, s.out_h(), s.out_w()}, kFloat32, &g).to(o);
    options = DeformConv2dOptions().set_padding(s.pad);
  }
  void forward() {
    NoGradGuard inference;
    (void)deform_conv2d(x, offset, w, b, mask, options);
  }
  void forward_backward() {
    for (const Tensor& t : {x, offset, mask, w, b})
      if (t.defined()) t.set_grad(Tensor());
    deform_conv2d(x, offset, w, b, mask, options).backward(grad);
  }
};

// On the GPU a third pass times forward+backward under DeterministicMode (the sorted gather for dx instead
// of atomicAdd): the price of identical bits. It has no torchvision counterpart.
template <typename Timer>
void run_device(const std::string& device_name, const Device& device, const Timer& time_ms) {
  std::printf("%-12s %-30s %-22s %10s\n", "bench", "shape", "pass", "median_ms");
  for (size_t shape = 0; shape < kShapes.size(); ++shape) {
    if (!g_only.shape.empty() && g_only.shape != std::to_string(shape)) continue;
    const BenchShape& s = kShapes[shape];
    for (bool modulated : {false, true}) {
      const std::string bench = modulated ? "dcn_v2" : "dcn_v1";
      if (!g_only.bench.empty() && g_only.bench != bench) continue;
      DeformRun run(s, modulated, device);
      for (int pass = 0; pass < (device.is_cuda() ? 3 : 2); ++pass) {
        const char* name = kPasses[pass];
        if (!g_only.pass.empty() && g_only.pass != name) continue;
        DeterministicGuard deterministic(pass == 2);
        const double ms = time_ms([&] { pass ? run.forward_backward() : run.forward(); });
        std::printf("%-12s %-30s %-22s %10.3f\n", bench.c_str(), s.label().c_str(), name, ms);
        emit(bench, device_name, s.label(), name, ms);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::ExtraFlags only =
      bench::value_flags({{"--bench", &g_only.bench}, {"--shape", &g_only.shape}, {"--pass", &g_only.pass}});
  const bench::Args args =
      bench::parse_args(argc, argv, 3, only, "[--bench dcn_v1|dcn_v2] [--shape 0|1] [--pass NAME]");
  bench::require_choice("bench_deform_conv2d", "--bench", g_only.bench, {"dcn_v1", "dcn_v2"});
  bench::require_choice("bench_deform_conv2d", "--shape", g_only.shape, {"0", "1"});
  bench::require_choice("bench_deform_conv2d", "--pass", g_only.pass, {kPasses[0], kPasses[1], kPasses[2]});
  return bench::run(
      args,
      [&] {
        std::printf("\n== CPU, median of %d runs ==\n", args.cpu_reps);
        run_device("cpu", Device::cpu(),
                   [&](const std::function<void()>& fn) { return bench::time_cpu_ms(fn, args.cpu_reps); });
      },
      [&](const std::string& device) {
        std::printf("\n== GPU %s (FP32 via cuBLAS, no TF32), CUDA events, median of %d runs after 10 warm-up ==\n",
                    device.c_str(), args.gpu_reps);
        run_device(device, Device::cuda(),
                   [&](const std::function<void()>& fn) { return bench::time_gpu_ms(fn, args.gpu_reps); });
      });
}
