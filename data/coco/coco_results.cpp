// Reading a COCO results file: a JSON array of {image_id, category_id, bbox, score}, bbox axis-aligned or
// rotated (coco_bbox.h), one kind per file.
#include <unordered_set>

#include "core/error.h"
#include "data/coco/coco_bbox.h"
#include "data/coco/coco_format.h"
#include "data/coco/json_fields.h"

namespace minidet::data {

std::vector<Detection> read_coco_results(const std::string& json_path, const CocoInstances* ground_truth) {
  using coco_detail::Entry;
  using coco_detail::Json;
  const Json root = coco_detail::parse_json_file(json_path, "coco results");
  MINIDET_CHECK(root.is_array(), "coco results: ", json_path,
                ": expected a JSON array of {image_id, category_id, bbox, score}, got ", root.type_name());
  std::unordered_set<int64_t> image_ids, category_ids;
  if (ground_truth != nullptr) {
    for (const CocoImage& image : ground_truth->images) image_ids.insert(image.id);
    for (const CocoCategory& category : ground_truth->categories) category_ids.insert(category.id);
  }
  std::vector<Detection> detections;
  detections.reserve(root.size());
  coco_detail::OneBoxKind box_kind;
  for (size_t i = 0; i < root.size(); ++i) {
    const Entry entry(root[i], "coco results: entry " + std::to_string(i) + " in " + json_path);
    Detection detection;
    detection.image_id = entry.integer("image_id");
    detection.category_id = entry.integer("category_id");
    detection.score = entry.number("score");
    const coco_detail::BoxField bbox = coco_detail::read_bbox(entry);
    box_kind.check(bbox, entry, "entry " + std::to_string(i));
    detection.box = bbox.box;
    detection.rotated = bbox.rotated;
    detection.rotated_box = bbox.rotated_box;
    if (ground_truth != nullptr) {
      MINIDET_CHECK(image_ids.count(detection.image_id) != 0, entry.where(), ": image_id ", detection.image_id,
                    " is not among the ground-truth images");
      MINIDET_CHECK(category_ids.count(detection.category_id) != 0, entry.where(), ": category_id ",
                    detection.category_id, " is not among the ground-truth categories");
    }
    detections.push_back(detection);
  }
  return detections;
}

}  // namespace minidet::data
