// See evaluation.h. Inference runs in batches through the same loader as training (no shuffle, no
// transform), so an evaluation sees exactly the images a COCO export of the dataset would hold.
#include "engine/evaluation.h"

#include <array>
#include <filesystem>

#include "core/error.h"
#include "core/grad_mode.h"
#include "data/eval/coco_eval.h"
#include "data/eval/voc_eval.h"
#include "data/image/image_io.h"
#include "data/loader/loader.h"

namespace minidet::engine {

std::vector<data::Detection> predict(models::FasterRCNN& model, const data::Dataset& dataset, int64_t batch,
                                     int64_t num_shards, int64_t shard_index) {
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  data::LoaderOptions options;
  options.batch_size = batch;
  options.shuffle = false;
  options.num_shards = num_shards;
  options.shard_index = shard_index;
  data::DataLoader loader(dataset, options);
  std::vector<data::Detection> detections;
  const auto category_of = [&](int64_t label) { return dataset.category_id(label); };
  while (auto b = loader.next()) {
    const std::vector<models::Detections> out = model.forward_infer(*b);
    for (size_t n = 0; n < out.size(); ++n) {
      const std::vector<data::Detection> found = detections_of(out[n], b->image_ids[n], category_of);
      detections.insert(detections.end(), found.begin(), found.end());
    }
  }
  model.train(was_training);
  return detections;
}

std::vector<data::Detection> detections_of(const models::Detections& found, int64_t image_id,
                                           const std::function<int64_t(int64_t)>& category_of) {
  const int64_t width = found.boxes.dim() == 2 ? found.boxes.size(1) : -1;
  MINIDET_CHECK(width == 4 || width == 5, "detections_of: boxes must be (D, 4) or (D, 5), got ",
                found.boxes.sizes());
  const std::vector<float> boxes = found.boxes.to(Device::cpu()).to(kFloat32).to_vector<float>();
  const std::vector<float> scores = found.scores.to(Device::cpu()).to(kFloat32).to_vector<float>();
  const std::vector<int64_t> labels = found.labels.to(Device::cpu()).to_vector<int64_t>();
  std::vector<data::Detection> detections;
  for (size_t d = 0; d < scores.size(); ++d) {
    const float* row = &boxes[width * d];
    if (width == 4) {
      detections.push_back({image_id, category_of(labels[d]), {row[0], row[1], row[2], row[3]}, scores[d]});
    } else {
      // A float32 angle normalised on the device may sit an ulp outside [-pi/2, pi/2) as a double.
      const data::RotatedBox box = data::RotatedBox{row[0], row[1], row[2], row[3], row[4]}.normalized();
      detections.push_back(data::rotated_detection(image_id, category_of(labels[d]), box, scores[d]));
    }
  }
  return detections;
}

std::vector<double> pack_detections(const std::vector<data::Detection>& detections) {
  std::vector<double> packed;
  packed.reserve(detections.size() * kPackedDetection);
  for (const data::Detection& d : detections) {
    const data::Box& b = d.box;
    const data::RotatedBox& r = d.rotated_box;
    const std::array<double, 5> box = d.rotated ? std::array<double, 5>{r.cx, r.cy, r.w, r.h, r.angle}
                                                : std::array<double, 5>{b.x1, b.y1, b.x2, b.y2, 0.0};
    packed.insert(packed.end(), {static_cast<double>(d.image_id), static_cast<double>(d.category_id), d.score,
                                 d.rotated ? 1.0 : 0.0});
    packed.insert(packed.end(), box.begin(), box.end());
  }
  return packed;
}

std::vector<data::Detection> unpack_detections(const std::vector<double>& packed) {
  MINIDET_CHECK(packed.size() % kPackedDetection == 0, "unpack_detections: ", packed.size(),
                " numbers are not a whole number of detections of ", kPackedDetection);
  std::vector<data::Detection> detections;
  for (size_t i = 0; i < packed.size(); i += kPackedDetection) {
    const double* p = &packed[i];
    const auto image_id = static_cast<int64_t>(p[0]), category_id = static_cast<int64_t>(p[1]);
    if (p[3] != 0)
      detections.push_back(data::rotated_detection(image_id, category_id, {p[4], p[5], p[6], p[7], p[8]}, p[2]));
    else
      detections.push_back({image_id, category_id, {p[4], p[5], p[6], p[7]}, p[2]});
  }
  return detections;
}

Scores score(const data::Dataset& dataset, const std::vector<data::Detection>& detections) {
  const data::GroundTruth truth = data::ground_truth_from_dataset(dataset);
  const data::VocResult voc = data::evaluate_voc(truth, detections);
  const data::CocoEvalResult coco = data::evaluate_coco(truth, detections);
  Scores s;
  s.map50 = voc.mean_average_precision;
  s.coco = coco.stats;
  for (const data::VocClassResult& c : voc.classes) s.class_ap.emplace_back(c.name, c.average_precision);
  s.table = data::format_voc(voc) + "\n" + data::format_coco_summary(coco);
  return s;
}

data::LabelledBoxes predictions_of(const data::Dataset& dataset, int64_t image_id,
                                   const std::vector<data::Detection>& detections) {
  // category id -> label: the dataset maps labels to ids, so invert it over its few classes.
  data::LabelledBoxes boxes;
  bool any_rotated = false;
  for (const data::Detection& d : detections) {
    if (d.image_id != image_id) continue;
    for (int64_t label = 1; label <= dataset.num_classes(); ++label) {
      if (dataset.category_id(label) != d.category_id) continue;
      boxes.boxes.push_back(d.box);
      boxes.labels.push_back(label);
      boxes.scores.push_back(d.score);
      boxes.rotated_boxes.push_back(d.rotated ? d.rotated_box : data::from_axis_aligned(d.box));
      any_rotated |= d.rotated;
    }
  }
  if (!any_rotated) boxes.rotated_boxes.clear();
  return boxes;
}

std::vector<std::string> draw_examples(const data::Dataset& dataset, const std::vector<data::Detection>& detections,
                                       int64_t count, const std::string& folder, double min_score) {
  std::filesystem::create_directories(folder);
  std::vector<std::string> written;
  const std::vector<std::string> names = dataset.class_names();
  for (int64_t i = 0; i < std::min(count, dataset.size()); ++i) {
    const data::Sample sample = dataset.get(i);
    const data::LabelledBoxes truth{sample.boxes, sample.labels, {}, sample.rotated_boxes};
    data::DrawOptions options;
    options.min_score = min_score;
    const data::Image picture =
        data::draw_detections(sample.image, truth, predictions_of(dataset, sample.image_id, detections), names, options);
    const std::string path =
        folder + "/" + std::filesystem::path(dataset.file_name(i)).stem().string() + ".png";
    data::write_png(picture, path);
    written.push_back(path);
  }
  return written;
}

}  // namespace minidet::engine
