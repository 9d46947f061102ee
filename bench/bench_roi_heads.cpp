// RoI heads benchmark: one training step of the second stage (sampling, RoIAlign, box head, losses and the
// backward) and one inference pass (box head, postprocessing with NMS), float32, CPU and GPU, against
// torchvision's RoIHeads through the twin script bench/roi_heads_torch.py.
//
//   bench_roi_heads [--json PATH] [--cpu-reps N] [--gpu-reps N] [--skip-cpu] [--skip-gpu]
//
// Workloads:
//   tiny   the tiny detector at 128 px, batch 8: features (8, 128, 16, 16) at stride 8, 300 proposals and 4
//          objects per image, C = 3, representation 256, 128 sampled RoIs per image
//   coco   a torchvision-sized step: features (2, 256, 50, 68) at stride 16 (800 x 1088 images), 1000
//          proposals and 10 objects per image, C = 80, representation 1024, 512 sampled RoIs per image
// Proposals: corners uniform in the image, sides uniform in [8, 8 + size/3); objects likewise. Weights are
// freshly initialised, so inference scores are near uniform (1/(C+1)): with C = 3 every candidate passes the
// 0.05 threshold and NMS has the most work, with C = 80 almost none does. roi_heads_torch.py draws the same
// distributions (not the same numbers). Each timed run is one whole call as a user makes it, its host
// synchronisations included: training reads the proposals as one padded table, as the RPN hands them over
// (built once, outside the timer, by pad_proposals), inference as per-image lists.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/factories.h"
#include "models/common/padded_proposals.h"
#include "models/roi_heads/roi_heads.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"

using namespace minidet;
using bench::emit;

namespace {

struct Workload {
  const char* name;
  int64_t images, channels, height, width, stride, proposals, objects, classes, representation, batch;
};

const std::vector<Workload> kWorkloads = {
    {"tiny", 8, 128, 16, 16, 8, 300, 4, 3, 256, 128},
    {"coco", 2, 256, 50, 68, 16, 1000, 10, 80, 1024, 512},
};

// count boxes inside an image of (height, width): corners uniform, sides in [8, 8 + min(height, width) / 3).
Tensor random_boxes(int64_t count, double height, double width, Generator& g) {
  const double side = std::min(height, width) / 3;
  std::vector<float> v(4 * count);
  for (int64_t i = 0; i < count; ++i) {
    const double w = 8 + g.next_uniform() * side, h = 8 + g.next_uniform() * side;
    const double x = g.next_uniform() * (width - w), y = g.next_uniform() * (height - h);
    v[4 * i + 0] = static_cast<float>(x);
    v[4 * i + 1] = static_cast<float>(y);
    v[4 * i + 2] = static_cast<float>(x + w);
    v[4 * i + 3] = static_cast<float>(y + h);
  }
  return from_vector(v, {count, 4});
}

std::string shape_of(const Workload& w) {
  return std::string(w.name) + ":N=" + std::to_string(w.images) + ",F=" + std::to_string(w.channels) +
         ",P=" + std::to_string(w.proposals) + ",C=" + std::to_string(w.classes);
}

template <typename Timer>
void run_all(const Device& device, const std::string& device_name, Timer timer) {
  std::printf("%-10s %-36s %-8s %10s\n", "bench", "shape", "pass", "median_ms");
  for (const Workload& w : kWorkloads) {
    Generator g(7);
    models::RoIHeadsOptions o;
    o.in_channels = w.channels;
    o.num_classes = w.classes;
    o.feature_stride = w.stride;
    o.representation_size = w.representation;
    o.batch_size_per_image = w.batch;
    o.check_targets = false;  // a detector checks its targets once at its boundary
    o.generator = &g;
    models::RoIHeads heads(o);
    heads.to(device);
    const double image_h = static_cast<double>(w.height * w.stride), image_w = static_cast<double>(w.width * w.stride);
    const Tensor features = randn({w.images, w.channels, w.height, w.width}, kFloat32, &g).to(device);
    std::vector<Tensor> proposals, gt_boxes, gt_labels;
    models::ImageSizes sizes;
    for (int64_t n = 0; n < w.images; ++n) {
      proposals.push_back(random_boxes(w.proposals, image_h, image_w, g).to(device));
      gt_boxes.push_back(random_boxes(w.objects, image_h, image_w, g).to(device));
      gt_labels.push_back(randint(1, w.classes + 1, {w.objects}, kInt64, &g).to(device));
      sizes.push_back({w.height * w.stride, w.width * w.stride});
    }
    const models::PaddedProposals padded = models::pad_proposals(proposals);  // the RPN's output
    Generator sampler(8);
    const double train_ms = timer([&] {
      heads.zero_grad();
      const auto losses = heads.forward_train(features, padded, gt_boxes, gt_labels, &sampler);
      add(losses.at("loss_classifier"), losses.at("loss_box_reg")).backward();
    });
    std::printf("%-10s %-36s %-8s %10.4f\n", "roi_heads", shape_of(w).c_str(), "train", train_ms);
    emit("roi_heads", device_name, shape_of(w), "train", train_ms);
    int64_t detected = 0;
    for (const auto& d : heads.forward_infer(features, padded, sizes)) detected += d.boxes.size(0);
    const double infer_ms = timer([&] { (void)heads.forward_infer(features, padded, sizes); });
    std::printf("%-10s %-36s %-8s %10.4f  (%lld detections)\n", "roi_heads", shape_of(w).c_str(), "infer", infer_ms,
                static_cast<long long>(detected));
    emit("roi_heads", device_name, shape_of(w), "infer", infer_ms, "\"detections\":" + std::to_string(detected));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Args args = bench::parse_args(argc, argv, 3);
  return bench::run(
      args,
      [&] {
        std::printf("\n== CPU, median of %d runs ==\n", args.cpu_reps);
        run_all(Device::cpu(), "cpu",
                [&](const std::function<void()>& fn) { return bench::time_cpu_ms(fn, args.cpu_reps); });
      },
      [&](const std::string& device) {
        std::printf("\n== GPU %s, CUDA events, median of %d runs after 10 warm-up ==\n", device.c_str(), args.gpu_reps);
        run_all(Device::cuda(), device,
                [&](const std::function<void()>& fn) { return bench::time_gpu_ms(fn, args.gpu_reps); });
      });
}
