// RoI ops benchmark: a table of ops x workloads, forward and forward+backward, CPU and GPU (float32).
//
//   bench_roi_ops [--json PATH] [--cpu-reps N] [--gpu-reps N] [--skip-cpu] [--skip-gpu]
//                 [--op NAME] [--workload big|tiny|head] [--pass NAME]
//
// --op, --workload and --pass keep only the rows they name, so that a profiler sees one combination, e.g.
//   ncu bench_roi_ops --skip-cpu --op roi_pool --workload tiny --pass "fwd+bwd det"   (scripts/gpu/profile.sh)
//
// Workloads (kWorkloads): a detector's box head on an FPN level, (2,256,200,272) features with 2000 RoIs at
// scale 1/4; a small one, (8,64,32,32) with 1024 RoIs at scale 1/8; and minidet's own detector's box head at
// batch 8, (8,128,16,16) with 128 RoIs per image at scale 1/16; 7x7 bins, sampling 2, aligned.
// The RoIs come from a 64-bit LCG that bench/roi_ops_torch.py reproduces exactly, so both programs time
// the same boxes: sizes uniform in [8, img/2] pixels, placed uniformly inside the image, batch k % N (the
// images dealt in turn), except in "head", whose RoIs come image by image (batch k * N / K) as a detector's
// sampler emits them.
// "fwd" runs under no-grad; "fwd+bwd" backpropagates a fixed random gradient to the features (the rois
// are proposals: constant, as in training). "fwd+bwd det" is the same under DeterministicMode. "fwd
// nocheck" is "fwd" with check_roi_values off: no check of the rows' values and so no host synchronisation,
// as in torchvision, which checks nothing (the detector calls the ops this way on its own proposals).
// bench/roi_ops_torch.py times torchvision on the same rows and prints the ratio. Never asserted.
// roi_pool is timed on the same boxes (7x7, no sampling); torchvision's roi_pool rounds the box to integers
// where minidet's does not, so the two compute slightly different bins at the same cost. roi_align_rotated
// gets the same boxes turned by an LCG angle in [-pi, pi); torchvision has no rotated RoIAlign (and mmcv is
// not installed), so its rows are minidet's alone, with no ratio.
//
// To add an op: append a RoiOp to kOps (its name is the JSON "bench" field; the twin script uses the same).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "ops/roi_align/roi_align.h"
#include "ops/roi_align_rotated/roi_align_rotated.h"
#include "ops/roi_pool/roi_pool.h"

using namespace minidet;
using bench::emit;

namespace {

struct Workload {
  const char* name;  // --workload
  int64_t n, c, h, w, rois;
  double scale;  // feature pixels per image pixel
  int64_t pooled, sampling;
  bool grouped;  // RoI k on image k * n / rois (each image's RoIs together), else k % n
  std::string label() const {
    char s[96];
    std::snprintf(s, sizeof s, "(%lld,%lld,%lld,%lld) K%lld 1/%g", (long long)n, (long long)c, (long long)h,
                  (long long)w, (long long)rois, 1.0 / scale);
    return s;
  }
};

const std::vector<Workload> kWorkloads = {
    {"big", 2, 256, 200, 272, 2000, 0.25, 7, 2, false},
    {"tiny", 8, 64, 32, 32, 1024, 0.125, 7, 2, false},
    {"head", 8, 128, 16, 16, 1024, 0.0625, 7, 2, true},
};

// The rows to time: empty = all.
struct Only {
  std::string op, workload, pass;
};
Only g_only;

// The shared RoI generator (mirrored in roi_ops_torch.py): uniform doubles from a 64-bit LCG.
struct Lcg {
  uint64_t state = 12345;
  double next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(state >> 11) / 9007199254740992.0;  // 2^53
  }
};

// (K, 5) rows (batch, x1, y1, x2, y2) in image pixels.
Tensor axis_aligned_rois(const Workload& wl) {
  Lcg lcg;
  const double img_w = wl.w / wl.scale, img_h = wl.h / wl.scale;
  std::vector<float> rows;
  for (int64_t k = 0; k < wl.rois; ++k) {
    const double bw = 8 + lcg.next() * (img_w / 2 - 8), bh = 8 + lcg.next() * (img_h / 2 - 8);
    const double x1 = lcg.next() * (img_w - bw), y1 = lcg.next() * (img_h - bh);
    const int64_t image = wl.grouped ? k * wl.n / wl.rois : k % wl.n;
    rows.insert(rows.end(), {float(image), float(x1), float(y1), float(x1 + bw), float(y1 + bh)});
  }
  return from_vector<float>(rows, {wl.rois, 5});
}

// (K, 6) rows (batch, cx, cy, w, h, angle): the axis-aligned boxes' centres and sizes, turned by a random angle.
Tensor rotated_rois(const Workload& wl) {
  const std::vector<float> boxes = axis_aligned_rois(wl).to_vector<float>();
  Lcg lcg;
  std::vector<float> rows;
  for (int64_t k = 0; k < wl.rois; ++k) {
    const float* b = &boxes[5 * k];
    const double angle = (2 * lcg.next() - 1) * 3.14159265358979323846;
    rows.insert(rows.end(), {b[0], (b[1] + b[3]) / 2, (b[2] + b[4]) / 2, b[3] - b[1], b[4] - b[2], float(angle)});
  }
  return from_vector<float>(rows, {wl.rois, 6});
}

struct RoiOp {
  std::string bench;
  std::function<Tensor(const Workload&)> make_rois;
  // check: check_roi_values (the rows' values, one host synchronisation on CUDA).
  std::function<Tensor(const Tensor& input, const Tensor& rois, const Workload&, bool check)> apply;
};

const std::vector<RoiOp> kOps = {
    {"roi_align", axis_aligned_rois,
     [](const Tensor& x, const Tensor& rois, const Workload& wl, bool check) {
       return roi_align(x, rois, RoIAlignOptions().set_output_size(wl.pooled).set_spatial_scale(wl.scale)
                                     .set_sampling_ratio(wl.sampling).set_aligned(true).set_check_roi_values(check));
     }},
    {"roi_pool", axis_aligned_rois,
     [](const Tensor& x, const Tensor& rois, const Workload& wl, bool check) {
       return roi_pool(x, rois, {wl.pooled, wl.pooled}, wl.scale, check);
     }},
    {"roi_align_rotated", rotated_rois,
     [](const Tensor& x, const Tensor& rois, const Workload& wl, bool check) {
       return roi_align_rotated(x, rois, RoIAlignRotatedOptions().set_output_size(wl.pooled).set_spatial_scale(wl.scale)
                                             .set_sampling_ratio(wl.sampling).set_aligned(true)
                                             .set_check_roi_values(check));
     }},
};

struct Run {
  Tensor x, rois, grad;
  const RoiOp* op;
  const Workload* wl;
  Run(const RoiOp& o, const Workload& w, const Device& device) : op(&o), wl(&w) {
    Generator g(1);
    x = randn({w.n, w.c, w.h, w.w}, kFloat32, &g).to(device).requires_grad_();
    rois = o.make_rois(w).to(device);
    NoGradGuard shape_only;
    grad = randn(o.apply(x, rois, w, true).sizes(), kFloat32, &g).to(device);
  }
  void forward(bool check) {
    NoGradGuard inference;
    (void)op->apply(x, rois, *wl, check);
  }
  void forward_backward() {
    x.set_grad(Tensor());
    op->apply(x, rois, *wl, true).backward(grad);
  }
};

const char* kPasses[4] = {"fwd", "fwd nocheck", "fwd+bwd", "fwd+bwd det"};

void time_all(const std::string& device_name, const Device& device,
              const std::function<double(const std::function<void()>&)>& time_ms) {
  std::printf("%-18s %-34s %-12s %10s\n", "op", "workload", "pass", "median_ms");
  for (const RoiOp& op : kOps) {
    if (!g_only.op.empty() && op.bench != g_only.op) continue;
    for (const Workload& wl : kWorkloads) {
      if (!g_only.workload.empty() && g_only.workload != wl.name) continue;
      Run run(op, wl, device);
      for (int pass = 0; pass < 4; ++pass) {
        if (!g_only.pass.empty() && g_only.pass != kPasses[pass]) continue;
        DeterministicGuard deterministic(pass == 3);
        const double ms = time_ms([&] { pass >= 2 ? run.forward_backward() : run.forward(pass == 0); });
        std::printf("%-18s %-34s %-12s %10.3f\n", op.bench.c_str(), wl.label().c_str(), kPasses[pass], ms);
        emit(op.bench, device_name, wl.label(), kPasses[pass], ms);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::ExtraFlags only =
      bench::value_flags({{"--op", &g_only.op}, {"--workload", &g_only.workload}, {"--pass", &g_only.pass}});
  const bench::Args args = bench::parse_args(argc, argv, 3, only, "[--op NAME] [--workload big|tiny|head] [--pass NAME]");
  std::vector<std::string> op_names, workload_names;
  for (const RoiOp& op : kOps) op_names.push_back(op.bench);
  for (const Workload& wl : kWorkloads) workload_names.push_back(wl.name);
  bench::require_choice("bench_roi_ops", "--op", g_only.op, op_names);
  bench::require_choice("bench_roi_ops", "--workload", g_only.workload, workload_names);
  bench::require_choice("bench_roi_ops", "--pass", g_only.pass, {kPasses[0], kPasses[1], kPasses[2], kPasses[3]});
  return bench::run(
      args,
      [&] {
        std::printf("\n== CPU, median of %d runs ==\n", args.cpu_reps);
        time_all("cpu", Device::cpu(), [&](const std::function<void()>& fn) { return bench::time_cpu_ms(fn, args.cpu_reps); });
      },
      [&](const std::string& device) {
        std::printf("\n== GPU %s, CUDA events, median of %d runs after 10 warm-up ==\n", device.c_str(), args.gpu_reps);
        time_all(device, Device::cuda(),
                 [&](const std::function<void()>& fn) { return bench::time_gpu_ms(fn, args.gpu_reps); });
      });
}
