// `minidet detect`: the detector of a checkpoint on image files (PNG or JPEG). Each image goes through the
// model on its own, at its own size (the backbone rounds feature sizes up, so any size works), optionally
// scaled first so its longer side is --resize pixels, the scale the model was trained at; boxes are mapped
// back to the file's pixels. Writes <out>/<name>.png with boxes, class names and scores, and
// <out>/detections.json in the COCO results format (image ids 1..N in argument order).
//
// Bad input ends in one line before the work it would spoil: --out that cannot be a folder, a threshold that
// is not a number in [0, 1], and an image (as read, or as --resize would make it) whose forward pass cannot fit
// in this machine's memory (inference_memory.h), rather than std::bad_alloc halfway through.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "core/grad_mode.h"
#include "data/coco/coco_format.h"
#include "data/image/draw.h"
#include "data/image/image_io.h"
#include "data/transforms/transforms.h"
#include "engine/checkpoints.h"
#include "examples/minidet/commands.h"
#include "examples/minidet/inference_memory.h"

namespace minidet::cli {

namespace fs = std::filesystem;

namespace {

void make_output_folder(const std::string& out) {
  MINIDET_CHECK(!out.empty(), "--out: give a folder for the pictures and detections.json");
  MINIDET_CHECK(!fs::exists(out) || fs::is_directory(out), "--out ", out, " is a file, not a folder");
  std::error_code error;
  fs::create_directories(out, error);
  MINIDET_CHECK(!error, "--out ", out, ": cannot create the folder (", error.message(), ")");
}

// The size the model sees: the file's, or --resize's with the longer side `resize` (in doubles, so that a huge
// --resize is measured, and refused, before it can overflow an integer).
std::array<double, 2> model_size(const data::Image& image, int64_t resize) {
  if (resize == 0) return {static_cast<double>(image.height), static_cast<double>(image.width)};
  const double scale = static_cast<double>(resize) / static_cast<double>(std::max(image.width, image.height));
  return {std::max(1.0, std::round(image.height * scale)), std::max(1.0, std::round(image.width * scale))};
}

}  // namespace

int run_detect(const DetectArgs& args) {
  set_threads(args.threads);
  MINIDET_CHECK(!args.images.empty(), "detect: give at least one image");
  MINIDET_CHECK(args.resize >= 0, "--resize must be >= 0, got ", args.resize);
  MINIDET_CHECK(args.score_threshold >= 0 && args.score_threshold <= 1, "--score-threshold must be in [0, 1], got ",
                args.score_threshold);  // CLI11's range check lets NaN through
  for (const std::string& path : args.images) MINIDET_CHECK(fs::is_regular_file(path), "no image file '", path, "'");
  const Device device = pick_device(args.device);
  const RunCheckpoint checkpoint = load_run_checkpoint(checkpoint_path(args.checkpoint, true));
  const RunConfig& config = checkpoint.config;
  std::unique_ptr<models::FasterRCNN> model = load_model(checkpoint, device);
  make_output_folder(args.out);

  NoGradGuard no_grad;
  std::vector<data::Detection> all;
  for (size_t i = 0; i < args.images.size(); ++i) {
    const int64_t image_id = static_cast<int64_t>(i) + 1;
    const data::Image image = data::read_image(args.images[i]);
    const auto [height, width] = model_size(image, args.resize);
    char size[64];
    std::snprintf(size, sizeof size, "%.0f x %.0f pixels", width, height);
    check_inference_memory(model->config().backbone, device, 1, height, width,
                           "detect: " + args.images[i] + (args.resize > 0 ? " resized to " : " at ") + size,
                           args.resize > 0 ? "use a smaller --resize" : "scale it down with --resize");
    data::Sample sample{image, {}, {}, {}, image_id};
    if (args.resize > 0)
      sample = data::resize(std::move(sample), static_cast<int64_t>(width), static_cast<int64_t>(height));
    const Tensor input = data::image_to_tensor(sample.image).view({1, 3, sample.image.height, sample.image.width});
    const models::Detections found = model->forward_infer(input.to(device)).at(0);
    const int64_t columns = found.boxes.size(1);  // 4, or 5 for a rotated detector (cx, cy, w, h, angle)
    const std::vector<float> boxes = found.boxes.to(Device::cpu()).to(kFloat32).to_vector<float>();
    const std::vector<float> scores = found.scores.to(Device::cpu()).to(kFloat32).to_vector<float>();
    const std::vector<int64_t> labels = found.labels.to(Device::cpu()).to_vector<int64_t>();
    data::LabelledBoxes drawn;
    for (size_t d = 0; d < scores.size(); ++d) {
      if (scores[d] < args.score_threshold) continue;
      // Boxes back to the file's pixels: the resize scaled both axes by (almost exactly) the same factor.
      const double sx = static_cast<double>(image.width) / sample.image.width;
      const double sy = static_cast<double>(image.height) / sample.image.height;
      const float* b = &boxes[columns * d];
      const int64_t label = labels[d];
      const int64_t category = label - 1 < static_cast<int64_t>(config.category_ids.size())
                                   ? config.category_ids[label - 1] : label;
      if (columns == 5) {  // sides scale by the mean factor: sx and sy differ by rounding only
        const double s = (sx + sy) / 2;
        const data::RotatedBox rotated{b[0] * sx, b[1] * sy, b[2] * s, b[3] * s, b[4]};
        all.push_back(data::rotated_detection(image_id, category, rotated, scores[d]));
        drawn.rotated_boxes.push_back(rotated);
      } else {
        all.push_back({image_id, category, data::Box{b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy}, scores[d]});
      }
      drawn.boxes.push_back(all.back().box);
      drawn.labels.push_back(label);
      drawn.scores.push_back(scores[d]);
    }
    const std::string picture = (fs::path(args.out) / fs::path(args.images[i]).stem()).string() + ".png";
    data::write_png(data::draw_detections(image, {}, drawn, config.classes), picture);
    std::printf("%s: %zu detections (image id %lld) -> %s\n", args.images[i].c_str(), drawn.boxes.size(),
                static_cast<long long>(image_id), picture.c_str());
  }
  const std::string results = (fs::path(args.out) / "detections.json").string();
  data::write_coco_results(all, results);
  std::printf("detections   %s\n", results.c_str());
  return 0;
}

}  // namespace minidet::cli
