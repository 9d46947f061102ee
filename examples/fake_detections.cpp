// Makes a plausible COCO results file from a ground-truth file, for trying the evaluator without a trained
// model: each object is found with some probability, its box jittered, with a score that is higher for
// better boxes; a few duplicates and false positives are added. Seeded, so the file is reproducible.
//
//   fake_detections --gt /tmp/shapes/test.json --out /tmp/shapes/fake_results.json --seed 1
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>

#include "core/generator.h"
#include "data/coco/coco_format.h"

using namespace minidet::data;

int main(int argc, char** argv) {
  CLI::App app{"Jitter ground truth into a COCO results file"};
  std::string gt_path, out_path = "fake_results.json";
  uint64_t seed = 1;
  double miss_rate = 0.1, jitter = 0.08, duplicate_rate = 0.05, false_per_image = 0.3;
  app.add_option("--gt", gt_path, "ground-truth COCO instances json")->required();
  app.add_option("--out", out_path, "results json to write")->capture_default_str();
  app.add_option("--seed", seed, "random seed")->capture_default_str();
  app.add_option("--miss-rate", miss_rate, "fraction of objects left undetected")->capture_default_str();
  app.add_option("--jitter", jitter, "box noise, relative to the box size")->capture_default_str();
  app.add_option("--duplicate-rate", duplicate_rate, "fraction of objects detected twice")->capture_default_str();
  app.add_option("--false-per-image", false_per_image, "mean false positives per image")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    const CocoInstances truth = read_coco_instances(gt_path);
    minidet::Generator generator(seed);
    std::vector<Detection> detections;
    auto jittered = [&](const Box& box, double scale) {
      const double w = box.width(), h = box.height();
      Box moved{box.x1 + scale * w * generator.next_normal(), box.y1 + scale * h * generator.next_normal(),
                box.x2 + scale * w * generator.next_normal(), box.y2 + scale * h * generator.next_normal()};
      if (moved.x2 < moved.x1) std::swap(moved.x1, moved.x2);
      if (moved.y2 < moved.y1) std::swap(moved.y1, moved.y2);
      return moved;
    };
    for (const CocoAnnotation& object : truth.annotations) {
      if (object.iscrowd || generator.next_uniform() < miss_rate) continue;
      const Box box = jittered(object.box, jitter);
      const double score = std::clamp(0.3 + 0.7 * box_iou(box, object.box) - 0.1 * generator.next_uniform(), 0.01, 1.0);
      detections.push_back({object.image_id, object.category_id, box, score});
      if (generator.next_uniform() < duplicate_rate)
        detections.push_back({object.image_id, object.category_id, jittered(object.box, 2 * jitter), score * 0.6});
    }
    for (const CocoImage& image : truth.images) {
      if (generator.next_uniform() >= false_per_image) continue;
      const double w = image.width * (0.1 + 0.3 * generator.next_uniform());
      const double h = image.height * (0.1 + 0.3 * generator.next_uniform());
      const double x = (image.width - w) * generator.next_uniform(), y = (image.height - h) * generator.next_uniform();
      const int64_t category = truth.categories[generator.next_int(0, truth.categories.size())].id;
      detections.push_back({image.id, category, {x, y, x + w, y + h}, 0.5 * generator.next_uniform()});
    }
    write_coco_results(detections, out_path);
    std::printf("%zu detections for %zu objects in %zu images -> %s\n", detections.size(), truth.annotations.size(),
                truth.images.size(), out_path.c_str());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fake_detections: %s\n", error.what());
    return 1;
  }
  return 0;
}
