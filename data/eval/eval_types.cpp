#include "data/eval/eval_types.h"

#include "core/error.h"
#include "data/dataset/dataset.h"

namespace minidet::data {

Detection rotated_detection(int64_t image_id, int64_t category_id, const RotatedBox& box, double score) {
  return {image_id, category_id, bounding_box(box), score, true, box};
}

GroundTruth ground_truth_from_dataset(const Dataset& dataset) {
  GroundTruth truth;
  truth.rotated = dataset.rotated();
  const std::vector<std::string> names = dataset.class_names();
  for (int64_t label = 1; label <= static_cast<int64_t>(names.size()); ++label) {
    truth.category_ids.push_back(dataset.category_id(label));
    truth.category_names.push_back(names[label - 1]);
  }
  int64_t next_object_id = 1;
  for (int64_t index = 0; index < dataset.size(); ++index) {
    const Target target = dataset.target(index);
    truth.image_ids.push_back(target.image_id);
    MINIDET_CHECK(!truth.rotated || target.rotated_boxes.size() == target.boxes.size(),
                  "ground_truth_from_dataset: image ", target.image_id, " of a rotated dataset has ",
                  target.boxes.size(), " boxes but ", target.rotated_boxes.size(), " rotated boxes");
    for (size_t i = 0; i < target.boxes.size(); ++i) {
      GroundTruthObject object{next_object_id++, target.image_id, dataset.category_id(target.labels[i]),
                               target.boxes[i], target.boxes[i].area(), false};
      if (truth.rotated) {
        object.rotated_box = target.rotated_boxes[i];
        object.area = object.rotated_box.area();
      }
      truth.objects.push_back(object);
    }
  }
  return truth;
}

}  // namespace minidet::data
