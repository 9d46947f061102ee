// CocoDataset: a COCO instances file plus its folder of PNG/JPEG images, seen as a Dataset.
//
// Categories become labels 1..C in increasing category id (COCO's ids have gaps: 1..90 for 80 classes);
// category_id(label) maps back, so detections are written with the file's own ids. Every image file is
// looked for when the dataset is opened, so a missing file is reported at once with its image entry;
// decoding happens in get(). A training sample leaves out crowd regions and zero-size boxes (they have no
// extent to learn); the evaluators still see them through instances().
// A rotated file (XYWHA bboxes, coco_format.h) makes a rotated dataset: samples carry rotated_boxes and, in
// boxes, their bounding boxes (not clipped to the image, as the rotated boxes are not).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "data/coco/coco_format.h"
#include "data/dataset/dataset.h"

namespace minidet::data {

class CocoDataset : public Dataset {
 public:
  CocoDataset(const std::string& json_path, const std::string& image_dir);

  int64_t size() const override { return static_cast<int64_t>(instances_.images.size()); }
  Sample get(int64_t index) const override;
  Target target(int64_t index) const override;
  std::vector<std::string> class_names() const override;
  int64_t category_id(int64_t label) const override;
  std::string file_name(int64_t index) const override;
  bool rotated() const override { return instances_.rotated; }

  int64_t label_of_category(int64_t category_id) const;
  const CocoInstances& instances() const { return instances_; }
  std::string image_path(int64_t index) const;

 private:
  void check_index(int64_t index) const;

  std::string json_path_;
  std::string image_dir_;
  CocoInstances instances_;
  std::vector<int64_t> category_ids_;                 // label - 1 -> category id, ascending
  std::unordered_map<int64_t, int64_t> labels_;       // category id -> label
  std::vector<std::vector<size_t>> image_annotations_;  // image index -> annotation indices, file order
};

}  // namespace minidet::data
