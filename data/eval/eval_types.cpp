#include "data/eval/eval_types.h"

#include "data/dataset/dataset.h"

namespace minidet::data {

GroundTruth ground_truth_from_dataset(const Dataset& dataset) {
  GroundTruth truth;
  const std::vector<std::string> names = dataset.class_names();
  for (int64_t label = 1; label <= static_cast<int64_t>(names.size()); ++label) {
    truth.category_ids.push_back(dataset.category_id(label));
    truth.category_names.push_back(names[label - 1]);
  }
  int64_t next_object_id = 1;
  for (int64_t index = 0; index < dataset.size(); ++index) {
    const Target target = dataset.target(index);
    truth.image_ids.push_back(target.image_id);
    for (size_t i = 0; i < target.boxes.size(); ++i)
      truth.objects.push_back({next_object_id++, target.image_id, dataset.category_id(target.labels[i]),
                               target.boxes[i], target.boxes[i].area(), false});
  }
  return truth;
}

}  // namespace minidet::data
