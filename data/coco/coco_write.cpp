// Writing COCO instances and results files, and exporting a Dataset (images as PNG) to that format.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/coco/coco_bbox.h"
#include "data/coco/coco_format.h"
#include "data/dataset/dataset.h"
#include "data/image/image_io.h"

namespace minidet::data {

namespace {

// ordered_json keeps keys in insertion order, so files read naturally: id first, then the rest.
using OrderedJson = nlohmann::ordered_json;

// The bbox in its file form (coco_bbox.h): [x, y, w, h], or [cx, cy, w, h, degrees] for a rotated box.
OrderedJson bbox_json(bool rotated, const Box& box, const RotatedBox& rotated_box) {
  return OrderedJson(rotated ? coco_detail::xywha(rotated_box) : coco_detail::xywh(box));
}

void write_text(const std::string& text, const std::string& path, const char* what) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::ofstream file(path, std::ios::binary);
  MINIDET_CHECK(file.good(), what, ": cannot open ", path, " for writing");
  file << text << '\n';
  file.close();
  MINIDET_CHECK(!file.fail(), what, ": cannot write ", path);
}

// One image's annotations; a rotated dataset's with their rotated boxes, box = the bounding box as reading
// would compute it, area = w * h.
void add_annotations(CocoInstances& instances, const Dataset& dataset, int64_t image_id,
                     const std::vector<Box>& boxes, const std::vector<int64_t>& labels,
                     const std::vector<RotatedBox>& rotated_boxes) {
  MINIDET_CHECK(!instances.rotated || rotated_boxes.size() == boxes.size(), "coco export: image ", image_id,
                " of a rotated dataset has ", boxes.size(), " boxes but ", rotated_boxes.size(), " rotated boxes");
  for (size_t i = 0; i < boxes.size(); ++i) {
    CocoAnnotation annotation;
    annotation.id = static_cast<int64_t>(instances.annotations.size()) + 1;
    annotation.image_id = image_id;
    annotation.category_id = dataset.category_id(labels[i]);
    annotation.box = boxes[i];
    annotation.area = boxes[i].area();
    if (instances.rotated) {
      annotation.rotated = true;
      annotation.rotated_box = rotated_boxes[i].normalized();
      annotation.box = bounding_box(annotation.rotated_box);
      annotation.area = annotation.rotated_box.area();
    }
    instances.annotations.push_back(annotation);
  }
}

CocoInstances categories_of(const Dataset& dataset) {
  CocoInstances instances;
  instances.rotated = dataset.rotated();
  const std::vector<std::string> names = dataset.class_names();
  for (int64_t label = 1; label <= static_cast<int64_t>(names.size()); ++label)
    instances.categories.push_back({dataset.category_id(label), names[label - 1], ""});
  return instances;
}

}  // namespace

void write_coco_instances(const CocoInstances& instances, const std::string& json_path) {
  OrderedJson root;
  // pycocotools' loadRes copies "info" and "licenses" from the ground truth, so they are always written.
  root["info"] = {{"description", "written by minidet"}};
  root["licenses"] = OrderedJson::array();
  OrderedJson& images = root["images"] = OrderedJson::array();
  for (const CocoImage& image : instances.images)
    images.push_back({{"id", image.id}, {"file_name", image.file_name}, {"width", image.width},
                      {"height", image.height}});
  OrderedJson& annotations = root["annotations"] = OrderedJson::array();
  for (const CocoAnnotation& a : instances.annotations) {
    MINIDET_CHECK(a.rotated == instances.rotated, "write_coco_instances: annotation ", a.id, " is ",
                  a.rotated ? "rotated" : "axis-aligned", " but the instances are ",
                  instances.rotated ? "rotated" : "axis-aligned", ": a file holds one kind of box");
    annotations.push_back({{"id", a.id}, {"image_id", a.image_id}, {"category_id", a.category_id},
                           {"bbox", bbox_json(a.rotated, a.box, a.rotated_box)}, {"area", a.area},
                           {"iscrowd", a.iscrowd ? 1 : 0}});
  }
  OrderedJson& categories = root["categories"] = OrderedJson::array();
  for (const CocoCategory& category : instances.categories)
    categories.push_back({{"id", category.id}, {"name", category.name}, {"supercategory", category.supercategory}});
  write_text(root.dump(), json_path, "write_coco_instances");
}

CocoInstances coco_instances_from_dataset(const Dataset& dataset) {
  CocoInstances instances = categories_of(dataset);
  for (int64_t index = 0; index < dataset.size(); ++index) {
    const Target target = dataset.target(index);
    instances.images.push_back({target.image_id, dataset.file_name(index), target.width, target.height});
    add_annotations(instances, dataset, target.image_id, target.boxes, target.labels, target.rotated_boxes);
  }
  return instances;
}

void export_coco(const Dataset& dataset, const std::string& json_path, const std::string& image_dir) {
  std::filesystem::create_directories(image_dir);
  CocoInstances instances = categories_of(dataset);
  for (int64_t index = 0; index < dataset.size(); ++index) {
    const Sample sample = dataset.get(index);
    const std::string file_name = dataset.file_name(index);
    write_png(sample.image, (std::filesystem::path(image_dir) / file_name).string());
    instances.images.push_back({sample.image_id, file_name, sample.image.width, sample.image.height});
    add_annotations(instances, dataset, sample.image_id, sample.boxes, sample.labels, sample.rotated_boxes);
  }
  write_coco_instances(instances, json_path);
}

void write_coco_results(const std::vector<Detection>& detections, const std::string& json_path) {
  OrderedJson results = OrderedJson::array();
  for (size_t i = 0; i < detections.size(); ++i) {
    const Detection& d = detections[i];
    MINIDET_CHECK(d.rotated == detections.front().rotated, "write_coco_results: detection ", i, " is ",
                  d.rotated ? "rotated" : "axis-aligned", " but detection 0 is not: a file holds one kind of box");
    results.push_back({{"image_id", d.image_id}, {"category_id", d.category_id},
                       {"bbox", bbox_json(d.rotated, d.box, d.rotated_box)}, {"score", d.score}});
  }
  write_text(results.dump(), json_path, "write_coco_results");
}

}  // namespace minidet::data
