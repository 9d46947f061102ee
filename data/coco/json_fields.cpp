#include "data/coco/json_fields.h"

#include <cmath>
#include <fstream>

#include "core/error.h"
#include "core/file_checks.h"

namespace minidet::data::coco_detail {

Json parse_json_file(const std::string& path, const char* what) {
  check_not_a_directory(what, path);
  std::ifstream file(path, std::ios::binary);
  MINIDET_CHECK(file.good(), what, ": cannot open ", path);
  try {
    return Json::parse(file);
  } catch (const Json::parse_error& error) {
    MINIDET_FAIL(what, ": ", path, " is not valid JSON (at byte ", error.byte, "): ", error.what());
  } catch (const Json::exception& error) {
    // Valid syntax the parser still refuses, e.g. a number beyond double's range (1e999).
    MINIDET_FAIL(what, ": ", path, " cannot be read as JSON: ", error.what());
  }
}

Entry::Entry(const Json& value, std::string where) : value_(value), where_(std::move(where)) {
  MINIDET_CHECK(value.is_object(), where_, ": expected a JSON object, got ", value.type_name());
}

bool Entry::has(const char* key) const { return value_.contains(key) && !value_.at(key).is_null(); }

const Json& Entry::field(const char* key) const {
  MINIDET_CHECK(has(key), where_, ": missing field '", key, "'");
  return value_.at(key);
}

int64_t Entry::integer(const char* key) const {
  const Json& value = field(key);
  MINIDET_CHECK(value.is_number_integer(), where_, ": field '", key, "' must be an integer, got ", value.dump());
  return value.get<int64_t>();
}

double Entry::number(const char* key) const {
  const Json& value = field(key);
  MINIDET_CHECK(value.is_number(), where_, ": field '", key, "' must be a number, got ", value.dump());
  const double number = value.get<double>();
  MINIDET_CHECK(std::isfinite(number), where_, ": field '", key, "' is not finite");
  return number;
}

std::string Entry::string(const char* key) const {
  const Json& value = field(key);
  MINIDET_CHECK(value.is_string(), where_, ": field '", key, "' must be a string, got ", value.dump());
  return value.get<std::string>();
}

bool Entry::flag(const char* key) const {
  const Json& value = field(key);
  if (value.is_boolean()) return value.get<bool>();
  MINIDET_CHECK(value.is_number_integer() && (value.get<int64_t>() == 0 || value.get<int64_t>() == 1), where_,
                ": field '", key, "' must be 0 or 1, got ", value.dump());
  return value.get<int64_t>() == 1;
}

const Json& Entry::array(const char* key) const {
  const Json& value = field(key);
  MINIDET_CHECK(value.is_array(), where_, ": field '", key, "' must be an array, got ", value.type_name());
  return value;
}

}  // namespace minidet::data::coco_detail
