#include "data/coco/coco_bbox.h"

#include "core/error.h"

namespace minidet::data::coco_detail {

namespace {

constexpr double kPi = 3.14159265358979323846;

const char* kind_name(bool rotated) {
  return rotated ? "5 numbers, a rotated box [cx, cy, w, h, angle in degrees]" : "4 numbers, a box [x, y, w, h]";
}

}  // namespace

double radians_from_degrees(double degrees) { return degrees * (kPi / 180); }
double degrees_from_radians(double radians) { return radians * (180 / kPi); }

BoxField read_bbox(const Entry& entry) {
  const Json& bbox = entry.array("bbox");
  bool numbers = bbox.size() == 4 || bbox.size() == 5;
  for (size_t i = 0; numbers && i < bbox.size(); ++i) numbers = bbox[i].is_number();
  MINIDET_CHECK(numbers, entry.where(), ": bbox must have 4 numbers [x, y, w, h] or 5 numbers [cx, cy, w, h, ",
                "angle in degrees] (a rotated box), got ", bbox.dump());
  std::vector<double> v;
  for (const Json& value : bbox) v.push_back(value.get<double>());
  BoxField field;
  if (v.size() == 4) {
    field.box = Box::from_xywh(v[0], v[1], v[2], v[3]);
    MINIDET_CHECK(is_finite(field.box), entry.where(), ": bbox is not finite: ", bbox.dump());
    MINIDET_CHECK(v[2] >= 0 && v[3] >= 0, entry.where(), ": bbox has a negative width or height: ", bbox.dump());
    return field;
  }
  field.rotated = true;
  field.rotated_box = RotatedBox{v[0], v[1], v[2], v[3], radians_from_degrees(v[4])}.normalized();
  field.box = bounding_box(field.rotated_box);
  MINIDET_CHECK(is_finite(field.rotated_box) && is_finite(field.box), entry.where(),
                ": rotated bbox is not finite (or its corners are not): ", bbox.dump());
  // A rotated box of zero width or height has no angle to speak of, and its IoU is 0 with everything.
  MINIDET_CHECK(v[2] > 0 && v[3] > 0, entry.where(), ": rotated bbox [cx, cy, w, h, angle] needs w > 0 and h > 0, got ",
                bbox.dump());
  return field;
}

std::vector<double> xywh(const Box& box) { return {box.x1, box.y1, box.width(), box.height()}; }

std::vector<double> xywha(const RotatedBox& box) {
  return {box.cx, box.cy, box.w, box.h, degrees_from_radians(box.angle)};
}

void OneBoxKind::check(const BoxField& field, const Entry& entry, const std::string& name) {
  if (!rotated_) {
    rotated_ = field.rotated;
    first_name_ = name;
    return;
  }
  MINIDET_CHECK(field.rotated == *rotated_, entry.where(), ": bbox has ", kind_name(field.rotated), ", but ",
                first_name_, " has ", kind_name(*rotated_), ": a file holds one kind of box");
}

}  // namespace minidet::data::coco_detail
