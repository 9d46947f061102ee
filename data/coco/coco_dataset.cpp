#include "data/coco/coco_dataset.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "data/image/image_io.h"

namespace minidet::data {

CocoDataset::CocoDataset(const std::string& json_path, const std::string& image_dir)
    : json_path_(json_path), image_dir_(image_dir), instances_(read_coco_instances(json_path)) {
  for (const CocoCategory& category : instances_.categories) category_ids_.push_back(category.id);
  std::sort(category_ids_.begin(), category_ids_.end());
  for (size_t i = 0; i < category_ids_.size(); ++i) labels_[category_ids_[i]] = static_cast<int64_t>(i) + 1;

  std::unordered_map<int64_t, size_t> image_index;
  for (size_t i = 0; i < instances_.images.size(); ++i) {
    image_index[instances_.images[i].id] = i;
    const std::string path = image_path(static_cast<int64_t>(i));
    MINIDET_CHECK(std::filesystem::is_regular_file(path), "coco: images[", i, "] (id ", instances_.images[i].id,
                  ") in ", json_path, ": image file ", path, " does not exist");
  }
  image_annotations_.resize(instances_.images.size());
  for (size_t i = 0; i < instances_.annotations.size(); ++i)
    image_annotations_[image_index.at(instances_.annotations[i].image_id)].push_back(i);
}

void CocoDataset::check_index(int64_t index) const {
  MINIDET_CHECK(index >= 0 && index < size(), "CocoDataset (", json_path_, "): index ", index, " is outside [0, ",
                size(), ")");
}

std::string CocoDataset::image_path(int64_t index) const {
  return (std::filesystem::path(image_dir_) / instances_.images[index].file_name).string();
}

std::string CocoDataset::file_name(int64_t index) const {
  check_index(index);
  return instances_.images[index].file_name;
}

Target CocoDataset::target(int64_t index) const {
  check_index(index);
  const CocoImage& image = instances_.images[index];
  Target target{image.id, image.width, image.height, {}, {}, {}};
  for (size_t annotation_index : image_annotations_[index]) {
    const CocoAnnotation& annotation = instances_.annotations[annotation_index];
    if (annotation.iscrowd || annotation.box.area() <= 0) continue;
    target.boxes.push_back(annotation.box);
    target.labels.push_back(labels_.at(annotation.category_id));
    if (annotation.rotated) target.rotated_boxes.push_back(annotation.rotated_box);
  }
  return target;
}

Sample CocoDataset::get(int64_t index) const {
  Target target = this->target(index);
  Sample sample;
  sample.image = read_image(image_path(index));
  MINIDET_CHECK(sample.image.width == target.width && sample.image.height == target.height, "coco: images[",
                index, "] (id ", target.image_id, ") in ", json_path_, ": ", image_path(index), " is ",
                sample.image.width, "x", sample.image.height, " but the file says ", target.width, "x",
                target.height);
  sample.boxes = std::move(target.boxes);
  sample.labels = std::move(target.labels);
  sample.rotated_boxes = std::move(target.rotated_boxes);
  sample.image_id = target.image_id;
  return sample;
}

std::vector<std::string> CocoDataset::class_names() const {
  std::vector<std::string> names(category_ids_.size());
  for (const CocoCategory& category : instances_.categories) names[labels_.at(category.id) - 1] = category.name;
  return names;
}

int64_t CocoDataset::category_id(int64_t label) const {
  MINIDET_CHECK(label >= 1 && label <= static_cast<int64_t>(category_ids_.size()), "CocoDataset: label ", label,
                " is outside 1..", category_ids_.size());
  return category_ids_[label - 1];
}

int64_t CocoDataset::label_of_category(int64_t category_id) const {
  auto found = labels_.find(category_id);
  MINIDET_CHECK(found != labels_.end(), "CocoDataset (", json_path_, "): category_id ", category_id,
                " is not among the categories");
  return found->second;
}

}  // namespace minidet::data
