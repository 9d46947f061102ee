// box_iou benchmark at detector shapes (float32), forward and forward+backward, CPU and GPU.
//
//   bench_box_iou [--json PATH] [--cpu-reps N] [--gpu-reps N] [--skip-cpu] [--skip-gpu]
//
// Shapes: 2000 x 2000 (proposals against proposals), 20000 x 200 (anchors against the ground truth of a
// batch: the matcher's shape) and 1000 x 20 (RoI-head proposals against one image's objects). Boxes have
// corners in [0, 800) and sides in [8, 208), as in the NMS benchmark. fwd is box_iou alone (no grad);
// fwd+bwd is box_iou then backward of a fixed random upstream gradient into both box sets.
// bench/box_iou_torch.py times torchvision.ops.box_iou on the same shapes and prints the ratio.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/factories.h"
#include "ops/boxes/box_iou.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/cat.h"

using namespace minidet;

namespace {

struct IouShape {
  int64_t n, m;
  std::string label() const { return std::to_string(n) + "x" + std::to_string(m); }
};

const std::vector<IouShape> kShapes = {{2000, 2000}, {20000, 200}, {1000, 20}};

Tensor random_boxes(int64_t count, Generator* g) {
  const Tensor corner = mul(rand({count, 2}, kFloat32, g), 800.0);
  const Tensor side = add(mul(rand({count, 2}, kFloat32, g), 200.0), 8.0);
  return cat({corner, add(corner, side)}, 1);
}

struct IouRun {
  Tensor a, b, grad;
  IouRun(const IouShape& s, const Device& device) {
    Generator g(1);
    a = random_boxes(s.n, &g).to(device).requires_grad_();
    b = random_boxes(s.m, &g).to(device).requires_grad_();
    grad = randn({s.n, s.m}, kFloat32, &g).to(device);
  }
  void forward() {
    NoGradGuard inference;
    (void)box_iou(a, b);
  }
  void forward_backward() {
    a.set_grad(Tensor());
    b.set_grad(Tensor());
    box_iou(a, b).backward(grad);
  }
};

void run_device(const std::string& device_name, const Device& device, int reps) {
  std::printf("%-14s %-8s %10s %14s\n", "shape", "pass", "median_ms", "Gpairs/s");
  for (const IouShape& s : kShapes) {
    IouRun run(s, device);
    for (int pass = 0; pass < 2; ++pass) {
      const auto fn = [&] { pass ? run.forward_backward() : run.forward(); };
      const double ms = device.is_cuda() ? bench::time_gpu_ms(fn, reps) : bench::time_cpu_ms(fn, reps);
      const double gpairs = double(s.n) * s.m / (ms * 1e6);
      const char* name = pass ? "fwd+bwd" : "fwd";
      std::printf("%-14s %-8s %10.4f %14.2f\n", s.label().c_str(), name, ms, gpairs);
      char extra[48];
      std::snprintf(extra, sizeof extra, "\"gpairs_per_s\":%.3f", gpairs);
      bench::emit("box_iou", device_name, s.label(), name, ms, extra);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Args args = bench::parse_args(argc, argv);
  return bench::run(
      args,
      [&] {
        std::printf("\n== CPU, median of %d runs ==\n", args.cpu_reps);
        run_device("cpu", Device::cpu(), args.cpu_reps);
      },
      [&](const std::string& device) {
        std::printf("\n== GPU %s, CUDA events, median of %d runs after 10 warm-up ==\n", device.c_str(),
                    args.gpu_reps);
        run_device(device, Device::cuda(), args.gpu_reps);
      });
}
