// Reading fields out of parsed JSON with errors that say where: every accessor names the file, the entry
// ("annotations[3] (id 17)") and the field, so a bad file is fixed without a debugger. Internal to data/coco.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace minidet::data::coco_detail {

using Json = nlohmann::json;

// Parses the whole file; a syntax error names the file and the byte where parsing stopped.
Json parse_json_file(const std::string& path, const char* what);

class Entry {
 public:
  // `where` is the entry's name in messages, e.g. "images[2] in /data/x.json".
  Entry(const Json& value, std::string where);

  bool has(const char* key) const;
  int64_t integer(const char* key) const;
  double number(const char* key) const;  // finite
  std::string string(const char* key) const;
  bool flag(const char* key) const;      // 0, 1, false or true
  const Json& array(const char* key) const;
  const std::string& where() const { return where_; }
  void rename(std::string where) { where_ = std::move(where); }

 private:
  const Json& field(const char* key) const;
  const Json& value_;
  std::string where_;
};

}  // namespace minidet::data::coco_detail
