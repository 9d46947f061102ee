// deform_conv2d benchmark (float32), DCNv1 (offsets) and DCNv2 (offsets and mask), forward and
// forward+backward (gradients of input, offset, weight, bias and mask), on the DESIGN.md workload and a
// detection-backbone stage.
//
//   bench_deform_conv2d [--json PATH] [--cpu-reps N] [--gpu-reps N] [--skip-cpu] [--skip-gpu]
//
// CPU: std::chrono::steady_clock, median of a few repetitions. GPU: CUDA events around each repetition
// after a warm-up, median of >= 50; FP32 through cuBLAS without TF32. bench/deform_conv2d_torch.py times
// torchvision.ops.deform_conv2d and torch's conv2d on the same shapes and, given this program's JSON file,
// prints the ratios. Offsets are N(0, 1) (most samples land inside the map, between pixels), the mask U(0, 1).
// Output: a table, and one JSON line per measurement (stdout, and PATH when given). Never asserted.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_common.h"
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

template <typename Timer>
void run_device(const std::string& device_name, const Device& device, const Timer& time_ms) {
  std::printf("%-12s %-30s %-8s %10s\n", "bench", "shape", "pass", "median_ms");
  for (const BenchShape& s : kShapes) {
    for (bool modulated : {false, true}) {
      DeformRun run(s, modulated, device);
      const std::string bench = modulated ? "dcn_v2" : "dcn_v1";
      for (int pass = 0; pass < 2; ++pass) {
        const double ms = time_ms([&] { pass ? run.forward_backward() : run.forward(); });
        const char* name = pass ? "fwd+bwd" : "fwd";
        std::printf("%-12s %-30s %-8s %10.3f\n", bench.c_str(), s.label().c_str(), name, ms);
        emit(bench, device_name, s.label(), name, ms);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Args args = bench::parse_args(argc, argv, 3);
  return bench::run(
      args,
      [&] {
        std::printf("\n== CPU, median of %d runs ==\n", args.cpu_reps);
        run_device("cpu", Device::cpu(), [&](const std::function<void()>& fn) { return bench::time_cpu_ms(fn, args.cpu_reps); });
      },
      [&](const std::string& device) {
        std::printf("\n== GPU %s (FP32 via cuBLAS, no TF32), CUDA events, median of %d runs after 10 warm-up ==\n",
                    device.c_str(), args.gpu_reps);
        run_device(device, Device::cuda(),
                   [&](const std::function<void()>& fn) { return bench::time_gpu_ms(fn, args.gpu_reps); });
      });
}
