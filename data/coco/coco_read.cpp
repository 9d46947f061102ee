// Reading a COCO instances file, with the checks and repairs listed in coco_format.h.
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "data/coco/coco_bbox.h"
#include "data/coco/coco_format.h"
#include "data/coco/json_fields.h"

namespace minidet::data {

using coco_detail::Entry;
using coco_detail::Json;

namespace {

std::string entry_name(const char* list, size_t index, const std::string& path) {
  return std::string(list) + "[" + std::to_string(index) + "] in " + path;
}

// Adds "(id N)" to the entry's name once its id is known, so later messages point at it both ways.
void name_with_id(Entry& entry, const char* list, size_t index, int64_t id, const std::string& path) {
  entry.rename(std::string(list) + "[" + std::to_string(index) + "] (id " + std::to_string(id) + ") in " + path);
}

const Json& top_level_list(const Json& root, const char* key, const std::string& path, bool required) {
  static const Json kEmpty = Json::array();
  if (!root.contains(key) || (root.at(key).is_null() && !required)) {
    MINIDET_CHECK(!required, "coco: ", path, ": missing top-level field '", key, "'");
    return kEmpty;
  }
  MINIDET_CHECK(root.at(key).is_array(), "coco: ", path, ": top-level field '", key, "' must be an array, got ",
                root.at(key).type_name());
  return root.at(key);
}

}  // namespace

CocoInstances read_coco_instances(const std::string& path) {
  const Json root = coco_detail::parse_json_file(path, "coco");
  MINIDET_CHECK(root.is_object(), "coco: ", path, ": expected a JSON object at the top level, got ", root.type_name());
  CocoInstances instances;

  std::unordered_map<int64_t, size_t> image_index;
  const Json& images = top_level_list(root, "images", path, true);
  for (size_t i = 0; i < images.size(); ++i) {
    Entry entry(images[i], "coco: " + entry_name("images", i, path));
    CocoImage image;
    image.id = entry.integer("id");
    name_with_id(entry, "coco: images", i, image.id, path);
    image.file_name = entry.string("file_name");
    image.width = entry.integer("width");
    image.height = entry.integer("height");
    MINIDET_CHECK(image.width > 0 && image.height > 0, entry.where(), ": image size must be positive, got ",
                  image.width, "x", image.height);
    MINIDET_CHECK(image_index.emplace(image.id, i).second, entry.where(), ": image id ", image.id,
                  " appears more than once");
    instances.images.push_back(std::move(image));
  }

  std::unordered_map<int64_t, size_t> category_index;
  const Json& categories = top_level_list(root, "categories", path, true);
  for (size_t i = 0; i < categories.size(); ++i) {
    Entry entry(categories[i], "coco: " + entry_name("categories", i, path));
    CocoCategory category;
    category.id = entry.integer("id");
    name_with_id(entry, "coco: categories", i, category.id, path);
    category.name = entry.string("name");
    if (entry.has("supercategory")) category.supercategory = entry.string("supercategory");
    MINIDET_CHECK(category_index.emplace(category.id, i).second, entry.where(), ": category id ", category.id,
                  " appears more than once");
    instances.categories.push_back(std::move(category));
  }

  std::unordered_map<int64_t, size_t> annotation_index;
  coco_detail::OneBoxKind box_kind;
  const Json& annotations = top_level_list(root, "annotations", path, false);
  for (size_t i = 0; i < annotations.size(); ++i) {
    Entry entry(annotations[i], "coco: " + entry_name("annotations", i, path));
    CocoAnnotation annotation;
    annotation.id = entry.integer("id");
    name_with_id(entry, "coco: annotations", i, annotation.id, path);
    MINIDET_CHECK(annotation_index.emplace(annotation.id, i).second, entry.where(), ": annotation id ",
                  annotation.id, " appears more than once");
    annotation.image_id = entry.integer("image_id");
    auto image = image_index.find(annotation.image_id);
    MINIDET_CHECK(image != image_index.end(), entry.where(), ": image_id ", annotation.image_id,
                  " is not among the images");
    annotation.category_id = entry.integer("category_id");
    MINIDET_CHECK(category_index.count(annotation.category_id) != 0, entry.where(), ": category_id ",
                  annotation.category_id, " is not among the categories");
    annotation.iscrowd = entry.has("iscrowd") && entry.flag("iscrowd");

    const CocoImage& owner = instances.images[image->second];
    const coco_detail::BoxField given = coco_detail::read_bbox(entry);
    box_kind.check(given, entry, "annotations[" + std::to_string(i) + "] (id " + std::to_string(annotation.id) + ")");
    const Box& box = given.box;  // of a rotated box, its bounds
    const Box clipped = clip_box(box, static_cast<double>(owner.width), static_cast<double>(owner.height));
    // A zero-size box may sit on the border; a box of positive size must keep some of it after clipping.
    const bool outside = box.x1 > owner.width || box.y1 > owner.height || box.x2 < 0 || box.y2 < 0 ||
                         (box.area() > 0 && clipped.area() == 0);
    MINIDET_CHECK(!outside, entry.where(), ": bbox ", box, given.rotated ? " (the rotated box's bounds " : " (",
                  "x1, y1, x2, y2) lies outside its ", owner.width, "x", owner.height, " image ", owner.id);
    // Rotated boxes are kept as they are (coco_format.h): only an axis-aligned box is clipped.
    annotation.box = given.rotated ? box : clipped;
    if (annotation.box != box) ++instances.clipped_boxes;
    annotation.rotated = given.rotated;
    annotation.rotated_box = given.rotated_box;
    annotation.area = entry.has("area") ? entry.number("area") : given.rotated ? given.rotated_box.area()
                                                                               : annotation.box.area();
    MINIDET_CHECK(annotation.area >= 0, entry.where(), ": area is negative: ", annotation.area);
    instances.annotations.push_back(annotation);
  }
  instances.rotated = box_kind.rotated();
  return instances;
}

GroundTruth ground_truth_from_coco(const CocoInstances& instances) {
  GroundTruth truth;
  for (const CocoImage& image : instances.images) truth.image_ids.push_back(image.id);
  for (const CocoCategory& category : instances.categories) {
    truth.category_ids.push_back(category.id);
    truth.category_names.push_back(category.name);
  }
  truth.rotated = instances.rotated;
  for (const CocoAnnotation& a : instances.annotations)
    truth.objects.push_back({a.id, a.image_id, a.category_id, a.box, a.area, a.iscrowd, a.rotated_box});
  return truth;
}

}  // namespace minidet::data
