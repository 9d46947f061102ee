// The two forms of a COCO "bbox" field, for instances and results files alike. Internal to data/coco.
//
//   4 numbers  [x, y, w, h]                COCO's axis-aligned box (w, h >= 0), held as Box (x, y, x + w, y + h)
//   5 numbers  [cx, cy, w, h, degrees]     detectron2's XYWHA (BoxMode.XYWHA_ABS, structures/rotated_boxes.py):
//                                          a rotated box, its angle in degrees counter-clockwise on screen;
//                                          w, h > 0. Held as RotatedBox with the angle in radians, normalised
//                                          into [-pi/2, pi/2) (data/box/rotated_box.h), plus its bounding box.
//
// detectron2's rotated convention is minidet's (docs/rotated.md): the corner (+w/2, +h/2) of the box's own
// frame sits at (cx + (w/2) cos a + (h/2) sin a, cy - (w/2) sin a + (h/2) cos a) (get_rotated_vertices in
// its box_iou_rotated_utils.h), so only the unit differs. Degrees and radians convert as Python's
// math.radians and math.degrees do (times pi/180 and 180/pi), so a script reading the same file gets the same
// radians bit for bit; a round trip through a file may move the angle by an ulp, and an angle within an ulp
// of -pi/2 may come back near +pi/2, the same box.
//
// A file holds one kind: the first bbox decides, and a bbox of the other kind is an error naming both entries.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/box/box.h"
#include "data/box/rotated_box.h"
#include "data/coco/json_fields.h"

namespace minidet::data::coco_detail {

struct BoxField {
  bool rotated = false;
  Box box;                 // rotated: the bounding box of rotated_box
  RotatedBox rotated_box;  // rotated only
};

// Reads entry's "bbox": 4 or 5 numbers, finite, with a finite bounding box; errors name the entry.
BoxField read_bbox(const Entry& entry);

// The numbers a file stores: [x, y, w, h], or [cx, cy, w, h, degrees].
std::vector<double> xywh(const Box& box);
std::vector<double> xywha(const RotatedBox& box);
double radians_from_degrees(double degrees);
double degrees_from_radians(double radians);

// Checks that every bbox of a file has the kind of the first one. `name` is the entry's short name
// ("annotations[3] (id 17)"), kept from the first entry for the message.
class OneBoxKind {
 public:
  void check(const BoxField& field, const Entry& entry, const std::string& name);
  bool rotated() const { return rotated_.value_or(false); }

 private:
  std::optional<bool> rotated_;
  std::string first_name_;
};

}  // namespace minidet::data::coco_detail
