// COCO "instances" files: reading, writing, and exporting any Dataset to them.
//
// The file is one JSON object (parsed with nlohmann-json):
//   images       [{id, file_name, width, height}]
//   annotations  [{id, image_id, category_id, bbox, area, iscrowd}]   (may be absent)
//   categories   [{id, name, supercategory?}]
// bbox is COCO's (x, y, width, height) in pixels; here it becomes Box (x, y, x + w, y + h). A rotated file
// writes detectron2's XYWHA instead, [cx, cy, w, h, angle in degrees counter-clockwise], which becomes a
// RotatedBox in radians, normalised into [-pi/2, pi/2), and its bounding box (coco_bbox.h). One file holds one
// kind of box; results files ([{image_id, category_id, bbox, score}]) follow the same two forms.
//
// What reading checks, each failure naming the file and the entry ("annotations[3] (id 17)"):
//   the JSON syntax; the fields' presence and types; unique ids; that an annotation's image_id and
//   category_id exist; finite boxes with w, h >= 0 (rotated: w, h > 0) and images with positive sizes; one
//   kind of bbox per file.
// What reading repairs (and counts in clipped_boxes): a box reaching outside its image is clipped to it.
// A box with no overlap with its image at all is an error: clipping would leave nothing. A missing "area"
// becomes the clipped box's area; a missing "iscrowd" is 0. Segmentations are ignored.
// Rotated boxes are never clipped: a rotated box reaching outside its image is kept as it is (clamping its
// corners would not give a rotated box back, docs/rotated.md), and its bounding box is not clipped either;
// one whose bounding box misses the image entirely is still an error. A missing "area" becomes w * h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/box/box.h"
#include "data/box/rotated_box.h"
#include "data/eval/eval_types.h"

namespace minidet::data {

class Dataset;

struct CocoImage {
  int64_t id = 0;
  std::string file_name;
  int64_t width = 0;
  int64_t height = 0;
  bool operator==(const CocoImage& o) const {
    return id == o.id && file_name == o.file_name && width == o.width && height == o.height;
  }
};

struct CocoAnnotation {
  int64_t id = 0;
  int64_t image_id = 0;
  int64_t category_id = 0;
  Box box;  // rotated: the bounding box of rotated_box
  double area = 0;
  bool iscrowd = false;
  bool rotated = false;      // a 5-number bbox: rotated_box is the annotation's box
  RotatedBox rotated_box{};  // radians, normalised; unused when rotated is false
  bool operator==(const CocoAnnotation& o) const {
    return id == o.id && image_id == o.image_id && category_id == o.category_id && box == o.box &&
           area == o.area && iscrowd == o.iscrowd && rotated == o.rotated && rotated_box == o.rotated_box;
  }
};

struct CocoCategory {
  int64_t id = 0;
  std::string name;
  std::string supercategory;
  bool operator==(const CocoCategory& o) const {
    return id == o.id && name == o.name && supercategory == o.supercategory;
  }
};

struct CocoInstances {
  std::vector<CocoImage> images;
  std::vector<CocoAnnotation> annotations;
  std::vector<CocoCategory> categories;
  int64_t clipped_boxes = 0;  // how many boxes reading clipped to their image
  bool rotated = false;       // the annotations are rotated boxes (XYWHA); a file without annotations is not
};

CocoInstances read_coco_instances(const std::string& json_path);
// Writes each annotation's bbox in its own form; refuses annotations whose kind differs from
// instances.rotated (a file holds one kind).
void write_coco_instances(const CocoInstances& instances, const std::string& json_path);

// The instances of a dataset: images in dataset order with Dataset::file_name, annotation ids 1, 2, ...,
// categories from Dataset::category_id and class_names(), area = box area. A rotated dataset
// (Dataset::rotated) gives rotated annotations, area = w * h, written as XYWHA.
CocoInstances coco_instances_from_dataset(const Dataset& dataset);
// Writes json_path and one PNG per image into image_dir (created if missing).
void export_coco(const Dataset& dataset, const std::string& json_path, const std::string& image_dir);

// The evaluators' view of the instances (every image and category, crowd flags, areas; rotated boxes when
// the instances are rotated, so that the evaluators measure rotated IoU).
GroundTruth ground_truth_from_coco(const CocoInstances& instances);

// Detections as a COCO results file: [{image_id, category_id, bbox: [x, y, w, h], score}], or for rotated
// detections bbox: [cx, cy, w, h, angle in degrees]. Refuses a list mixing the two (reading would).
void write_coco_results(const std::vector<Detection>& detections, const std::string& json_path);
// Reads a results file; a 5-number bbox gives a rotated detection (Detection::rotated). With `ground_truth`,
// an image_id or category_id that it lacks is an error naming the entry (pycocotools would drop such
// detections silently or assert).
std::vector<Detection> read_coco_results(const std::string& json_path, const CocoInstances* ground_truth = nullptr);

}  // namespace minidet::data
