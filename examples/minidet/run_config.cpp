// RunConfig's JSON form. Each section lists its keys once in a visit_* function that both the writer and
// the reader walk, so the key list cannot drift between them (the pattern of detector_config.cpp).
#include "examples/minidet/run_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/file_checks.h"
#include "core/factories.h"

namespace minidet::cli {

namespace {

using nlohmann::json;

template <class V, class S>
void visit_schedule(V& v, S& s) {
  v.field("steps", s.steps);
  v.field("batch", s.batch);
  v.field("lr", s.lr);
  v.field("weight_decay", s.weight_decay);
  v.field("warmup", s.warmup);
  v.field("min_lr_factor", s.min_lr_factor);
  v.field("eval_every", s.eval_every);
  v.field("log_every", s.log_every);
  v.field("flip_probability", s.flip_probability);
  v.field("seed", s.seed);
  v.field("detection_images", s.detection_images);
  v.field("cuda_graphs", s.cuda_graphs);
}

template <class V, class D>
void visit_data(V& v, D& d) {
  v.field("image_size", d.image_size);
  v.field("train_images", d.train_images);
  v.field("test_images", d.test_images);
  v.field("train_json", d.train_json);
  v.field("train_images_dir", d.train_images_dir);
  v.field("val_json", d.val_json);
  v.field("val_images_dir", d.val_images_dir);
}

// Written in visit order (ordered_json), so config.json reads like the header's list.
struct Writer {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  template <class T>
  void field(const char* key, const T& value) { out[key] = value; }
};

// Applies the keys of one section's object; `section` prefixes the names in messages.
struct Reader {
  const json& in;
  std::string section;
  std::vector<std::string> known;

  void check_type(const char* key, bool ok, const char* expected) const {
    MINIDET_CHECK(ok, "config: ", section, ".", key, " must be ", expected, ", got ", in.at(key).dump());
  }
  void field(const char* key, int64_t& value) {
    known.push_back(key);
    if (!in.contains(key)) return;
    check_type(key, in.at(key).is_number_integer(), "an integer");
    value = in.at(key).get<int64_t>();
  }
  void field(const char* key, uint64_t& value) {
    known.push_back(key);
    if (!in.contains(key)) return;
    check_type(key, in.at(key).is_number_unsigned(), "a non-negative integer");
    value = in.at(key).get<uint64_t>();
  }
  void field(const char* key, double& value) {
    known.push_back(key);
    if (!in.contains(key)) return;
    check_type(key, in.at(key).is_number(), "a number");
    value = in.at(key).get<double>();
  }
  void field(const char* key, bool& value) {
    known.push_back(key);
    if (!in.contains(key)) return;
    check_type(key, in.at(key).is_boolean(), "true or false");
    value = in.at(key).get<bool>();
  }
  void field(const char* key, std::string& value) {
    known.push_back(key);
    if (!in.contains(key)) return;
    check_type(key, in.at(key).is_string(), "a string");
    value = in.at(key).get<std::string>();
  }
  // After the fields: anything else in the object is a typo.
  void refuse_unknown() const {
    for (const auto& item : in.items()) {
      bool found = false;
      for (const std::string& k : known) found = found || k == item.key();
      if (!found) {
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
        MINIDET_FAIL("config: unknown key '", section, ".", item.key(), "' (known keys: ", list, ")");
      }
    }
  }
};

json section_object(const json& root, const char* name) {
  const json& value = root.at(name);
  MINIDET_CHECK(value.is_object(), "config: '", name, "' must be an object, got ", value.dump());
  return value;
}

void apply_json(const json& root, RunConfig& config) {
  MINIDET_CHECK(root.is_object(), "config: expected a JSON object at the top, got ", root.dump());
  for (const auto& item : root.items()) {
    const std::string& key = item.key();
    if (key == "schedule") {
      Reader reader{section_object(root, "schedule"), "schedule", {}};
      visit_schedule(reader, config.schedule);
      reader.refuse_unknown();
    } else if (key == "data") {
      Reader reader{section_object(root, "data"), "data", {}};
      visit_data(reader, config.data);
      reader.refuse_unknown();
    } else if (key == "detector") {
      // DetectorConfig applies its keys onto its defaults; start from the current detector instead, so
      // --set detector.x=... keeps the rest of a loaded config.
      json merged = json::parse(config.detector.to_json());
      merged.merge_patch(section_object(root, "detector"));
      try {
        config.detector = models::DetectorConfig::from_json(merged.dump());
      } catch (const Error& e) {
        MINIDET_FAIL("config: detector: ", e.message());
      }
    } else if (key == "classes") {
      const json& value = item.value();
      bool ok = value.is_array();
      for (const json& name : value) ok = ok && name.is_string();
      MINIDET_CHECK(ok, "config: 'classes' must be an array of strings, got ", value.dump());
      config.classes = value.get<std::vector<std::string>>();
    } else if (key == "category_ids") {
      const json& value = item.value();
      bool ok = value.is_array();
      for (const json& id : value) ok = ok && id.is_number_integer();
      MINIDET_CHECK(ok, "config: 'category_ids' must be an array of integers, got ", value.dump());
      config.category_ids = value.get<std::vector<int64_t>>();
    } else {
      MINIDET_FAIL("config: unknown key '", key, "' (known sections: schedule, data, detector, classes, category_ids)");
    }
  }
}

json parse_json(const std::string& text, const std::string& where) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // syntax errors, and numbers beyond double's range (1e999)
    MINIDET_FAIL("config: ", where, " is not valid JSON (", e.what(), ")");
  }
}

}  // namespace

std::string RunConfig::to_json(int indent) const {
  Writer schedule_writer, data_writer;
  visit_schedule(schedule_writer, schedule);
  visit_data(data_writer, data);
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  root["schedule"] = schedule_writer.out;
  root["data"] = data_writer.out;
  root["detector"] = nlohmann::ordered_json::parse(detector.to_json());
  root["classes"] = classes;
  root["category_ids"] = category_ids;
  return root.dump(indent);
}

RunConfig RunConfig::from_json(const std::string& text, const std::string& where) {
  RunConfig config;
  apply_json(parse_json(text, where), config);
  return config;
}

RunConfig RunConfig::load(const std::string& path) {
  check_not_a_directory("config", path);
  std::ifstream in(path);
  MINIDET_CHECK(in.good(), "cannot open config '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  return from_json(text.str(), "'" + path + "'");
}

void RunConfig::set(const std::string& assignment) {
  const size_t eq = assignment.find('=');
  MINIDET_CHECK(eq != std::string::npos && eq > 0, "--set expects section.key=value, got '", assignment, "'");
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  MINIDET_CHECK(key.find('.') != std::string::npos,
                "--set ", key, ": name a section (schedule., data. or detector.), e.g. schedule.steps=300");
  json value;
  try {
    value = json::parse(text);
  } catch (const json::exception&) {
    value = text;  // a bare word is a string: data.train_json=annotations.json
  }
  // "a.b.c" -> {"a": {"b": {"c": value}}}, applied like a file.
  json root = std::move(value);
  size_t end = key.size();
  while (true) {
    const size_t dot = key.rfind('.', end - 1);
    const size_t begin = dot == std::string::npos ? 0 : dot + 1;
    MINIDET_CHECK(begin < end, "--set: empty part in key '", key, "'");
    root = json{{key.substr(begin, end - begin), std::move(root)}};
    if (dot == std::string::npos) break;
    end = dot;
  }
  apply_json(root, *this);
}

void RunConfig::validate() const {
  const Schedule& s = schedule;
  MINIDET_CHECK(s.steps >= 1, "config: schedule.steps must be at least 1, got ", s.steps);
  MINIDET_CHECK(s.batch >= 1, "config: schedule.batch must be at least 1, got ", s.batch);
  MINIDET_CHECK(s.lr > 0, "config: schedule.lr must be positive, got ", s.lr);
  MINIDET_CHECK(s.weight_decay >= 0, "config: schedule.weight_decay must be >= 0, got ", s.weight_decay);
  MINIDET_CHECK(s.warmup >= 0, "config: schedule.warmup must be >= 0, got ", s.warmup);
  MINIDET_CHECK(s.min_lr_factor >= 0 && s.min_lr_factor <= 1, "config: schedule.min_lr_factor must be in [0, 1], got ",
                s.min_lr_factor);
  MINIDET_CHECK(s.eval_every >= 0, "config: schedule.eval_every must be >= 0 (0: only at the end), got ", s.eval_every);
  MINIDET_CHECK(s.log_every >= 1, "config: schedule.log_every must be at least 1, got ", s.log_every);
  MINIDET_CHECK(s.flip_probability >= 0 && s.flip_probability <= 1,
                "config: schedule.flip_probability must be in [0, 1], got ", s.flip_probability);
  MINIDET_CHECK(s.detection_images >= 0, "config: schedule.detection_images must be >= 0, got ", s.detection_images);
  const DataConfig& d = data;
  MINIDET_CHECK(d.image_size >= 16 && d.image_size <= 4096, "config: data.image_size must be in [16, 4096], got ",
                d.image_size);
  MINIDET_CHECK(d.train_images >= 1 && d.test_images >= 1,
                "config: data.train_images and data.test_images must be at least 1");
  MINIDET_CHECK(d.train_json.empty() == d.train_images_dir.empty(),
                "config: COCO training data needs both --train-json and --train-images");
  MINIDET_CHECK(d.val_json.empty() == d.val_images_dir.empty(),
                "config: COCO validation data needs both --val-json and --val-images");
  MINIDET_CHECK(d.val_json.empty() || d.is_coco(),
                "config: --val-json needs COCO training data too (--train-json, --train-images)");
  MINIDET_CHECK(!d.is_coco() || !d.val_json.empty(),
                "config: COCO training data needs validation data too (--val-json, --val-images)");
  try {
    detector.validate();
  } catch (const Error& e) {
    MINIDET_FAIL("config: detector: ", e.message());
  }
}

Tensor RunConfig::to_tensor() const {
  const std::string text = to_json(0);
  return from_vector<uint8_t>(std::vector<uint8_t>(text.begin(), text.end()));
}

RunConfig RunConfig::from_tensor(const Tensor& bytes, const std::string& where) {
  MINIDET_CHECK(bytes.dtype() == kUInt8 && bytes.dim() == 1, where, ": entry '", kConfigEntry,
                "' is not a uint8 vector");
  const std::vector<uint8_t> data = bytes.to_vector<uint8_t>();
  return from_json(std::string(data.begin(), data.end()), where);
}

}  // namespace minidet::cli
