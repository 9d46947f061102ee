// See evaluation.h. Inference runs in batches through the same loader as training (no shuffle, no
// transform), so an evaluation sees exactly the images a COCO export of the dataset would hold.
#include "engine/evaluation.h"

#include <filesystem>

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
  while (auto b = loader.next()) {
    const std::vector<models::Detections> out = model.forward_infer(*b);
    for (size_t n = 0; n < out.size(); ++n) {
      const std::vector<float> boxes = out[n].boxes.to(Device::cpu()).to(kFloat32).to_vector<float>();
      const std::vector<float> scores = out[n].scores.to(Device::cpu()).to(kFloat32).to_vector<float>();
      const std::vector<int64_t> labels = out[n].labels.to(Device::cpu()).to_vector<int64_t>();
      for (size_t d = 0; d < scores.size(); ++d)
        detections.push_back({b->image_ids[n], dataset.category_id(labels[d]),
                              {boxes[4 * d], boxes[4 * d + 1], boxes[4 * d + 2], boxes[4 * d + 3]}, scores[d]});
    }
  }
  model.train(was_training);
  return detections;
}

std::vector<double> pack_detections(const std::vector<data::Detection>& detections) {
  std::vector<double> packed;
  packed.reserve(detections.size() * 7);
  for (const data::Detection& d : detections)
    for (double value : {static_cast<double>(d.image_id), static_cast<double>(d.category_id), d.box.x1, d.box.y1,
                         d.box.x2, d.box.y2, d.score})
      packed.push_back(value);
  return packed;
}

std::vector<data::Detection> unpack_detections(const std::vector<double>& packed) {
  std::vector<data::Detection> detections;
  for (size_t i = 0; i + 7 <= packed.size(); i += 7)  // ids are integers far below 2^53: exact in a double
    detections.push_back({static_cast<int64_t>(packed[i]), static_cast<int64_t>(packed[i + 1]),
                          {packed[i + 2], packed[i + 3], packed[i + 4], packed[i + 5]}, packed[i + 6]});
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
  for (const data::Detection& d : detections) {
    if (d.image_id != image_id) continue;
    for (int64_t label = 1; label <= dataset.num_classes(); ++label) {
      if (dataset.category_id(label) != d.category_id) continue;
      boxes.boxes.push_back(d.box);
      boxes.labels.push_back(label);
      boxes.scores.push_back(d.score);
    }
  }
  return boxes;
}

std::vector<std::string> draw_examples(const data::Dataset& dataset, const std::vector<data::Detection>& detections,
                                       int64_t count, const std::string& folder, double min_score) {
  std::filesystem::create_directories(folder);
  std::vector<std::string> written;
  const std::vector<std::string> names = dataset.class_names();
  for (int64_t i = 0; i < std::min(count, dataset.size()); ++i) {
    const data::Sample sample = dataset.get(i);
    const data::LabelledBoxes truth{sample.boxes, sample.labels, {}};
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
