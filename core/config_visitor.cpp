// The three walkers of core/config_visitor.h: Writer (to JSON), Reader (from JSON, with the type checks and
// the unknown-key check) and set_config_value, which turns "a.b.c=value" into {"a":{"b":{"c":value}}} and
// hands it to the Reader, so an override is checked exactly like a file.
#include "core/config_visitor.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/file_checks.h"

namespace minidet {

namespace {

using Json = nlohmann::json;

// ordered_json keeps insertion order, so the text lists the keys as the visit function does.
class Writer final : public ConfigVisitor {
 public:
  nlohmann::ordered_json current = nlohmann::ordered_json::object();

  void field(const char* key, int64_t& value) override { current[key] = value; }
  void field(const char* key, uint64_t& value) override { current[key] = value; }
  void field(const char* key, double& value) override { current[key] = value; }
  void field(const char* key, bool& value) override { current[key] = value; }
  void field(const char* key, std::string& value) override { current[key] = value; }
  void field(const char* key, std::vector<int64_t>& value) override { current[key] = value; }
  void field(const char* key, std::vector<double>& value) override { current[key] = value; }
  void field(const char* key, std::vector<std::string>& value) override { current[key] = value; }
  void field(const char* key, std::array<double, 4>& value) override { current[key] = value; }

  // The nested object is built on its own and moved in whole once body() is done.
  void object(const char* key, const std::function<void()>& body) override {
    nlohmann::ordered_json parent = std::move(current);
    current = nlohmann::ordered_json::object();
    body();
    parent[key] = std::move(current);
    current = std::move(parent);
  }

 protected:
  void choice_index(const char* key, size_t& index, const std::vector<const char*>& names) override {
    current[key] = names[index];
  }
};

// Applies the keys present in one JSON object, checking each value's type; a frame per open object remembers
// the keys the visit function asked for, so refuse_unknown can name whatever else the object holds.
class Reader final : public ConfigVisitor {
 public:
  Reader(const Json& root, const char* what) : what_(what) {
    MINIDET_CHECK(root.is_object(), what_, ": expected a JSON object at the top, got ", root.type_name());
    frames_.push_back({&root, "", {}});
  }

  void field(const char* key, int64_t& value) override { read(key, value); }
  void field(const char* key, uint64_t& value) override { read(key, value); }
  void field(const char* key, double& value) override { read(key, value); }
  void field(const char* key, bool& value) override { read(key, value); }
  void field(const char* key, std::string& value) override { read(key, value); }
  void field(const char* key, std::vector<int64_t>& value) override { read(key, value); }
  void field(const char* key, std::vector<double>& value) override { read(key, value); }
  void field(const char* key, std::vector<std::string>& value) override { read(key, value); }
  void field(const char* key, std::array<double, 4>& value) override { read(key, value); }

  void object(const char* key, const std::function<void()>& body) override {
    const Json* j = find(key);
    if (!j) return;
    need(j->is_object(), dotted(key), "an object", *j);
    frames_.push_back({j, dotted(key) + ".", {}});
    body();
    refuse_unknown();
    frames_.pop_back();
  }

  // After the visit: a key of the current object that nobody asked for is a typo.
  void refuse_unknown() const {
    const Frame& f = frames_.back();
    for (const auto& item : f.object->items()) {
      if (std::find(f.known.begin(), f.known.end(), item.key()) != f.known.end()) continue;
      std::string known;
      for (const std::string& k : f.known) known += (known.empty() ? "" : ", ") + k;
      MINIDET_FAIL(what_, ": unknown key '", f.prefix, item.key(), "' (known keys: ", known, ")");
    }
  }

 protected:
  void choice_index(const char* key, size_t& index, const std::vector<const char*>& names) override {
    const Json* j = find(key);
    if (!j) return;
    for (size_t i = 0; i < names.size(); ++i) {
      if (j->is_string() && *j == names[i]) {
        index = i;
        return;
      }
    }
    std::string expected;  // "a", "b" or "c"
    for (size_t i = 0; i < names.size(); ++i) {
      expected += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + "\"" + names[i] + "\"";
    }
    need(false, dotted(key), expected.c_str(), *j);
  }

 private:
  struct Frame {
    const Json* object;
    std::string prefix;              // "detector.rpn." inside detector.rpn
    std::vector<std::string> known;  // in visit order, as the message lists them
  };

  const Json* find(const char* key) {
    Frame& f = frames_.back();
    f.known.emplace_back(key);
    const auto it = f.object->find(key);
    return it == f.object->end() ? nullptr : &*it;
  }
  std::string dotted(const char* key) const { return frames_.back().prefix + key; }

  template <class T>
  void read(const char* key, T& value) {
    if (const Json* j = find(key)) convert(*j, dotted(key), value);
  }

  // "<what>: <name> must be <expected>, got <value>" unless ok.
  void need(bool ok, const std::string& name, const char* expected, const Json& got) const {
    MINIDET_CHECK(ok, what_, ": ", name, " must be ", expected, ", got ", got.dump());
  }

  void convert(const Json& j, const std::string& name, int64_t& out) const {
    need(j.is_number_integer(), name, "an integer", j);
    out = j.get<int64_t>();
  }
  void convert(const Json& j, const std::string& name, uint64_t& out) const {
    need(j.is_number_unsigned(), name, "a non-negative integer", j);
    out = j.get<uint64_t>();
  }
  void convert(const Json& j, const std::string& name, double& out) const {
    need(j.is_number(), name, "a number", j);
    out = j.get<double>();
  }
  void convert(const Json& j, const std::string& name, bool& out) const {
    need(j.is_boolean(), name, "true or false", j);
    out = j.get<bool>();
  }
  void convert(const Json& j, const std::string& name, std::string& out) const {
    need(j.is_string(), name, "a string", j);
    out = j.get<std::string>();
  }
  // A list is read whole into a copy, so a bad element leaves the field as it was.
  template <class T>
  void convert(const Json& j, const std::string& name, std::vector<T>& out) const {
    need(j.is_array(), name, "a list", j);
    std::vector<T> values(j.size());
    for (size_t i = 0; i < j.size(); ++i) convert(j[i], name + "[" + std::to_string(i) + "]", values[i]);
    out = std::move(values);
  }
  void convert(const Json& j, const std::string& name, std::array<double, 4>& out) const {
    need(j.is_array() && j.size() == 4, name, "a list of 4 numbers", j);
    std::array<double, 4> values{};
    for (size_t i = 0; i < 4; ++i) convert(j[i], name + "[" + std::to_string(i) + "]", values[i]);
    out = values;
  }

  const char* what_;
  std::vector<Frame> frames_;
};

void apply_json(const Json& root, const char* what, const VisitConfig& visit) {
  Reader reader(root, what);
  visit(reader);
  reader.refuse_unknown();
}

}  // namespace

std::string write_config_json(const VisitConfig& visit, int indent) {
  Writer writer;
  visit(writer);
  return writer.current.dump(indent);
}

void read_config_json(const std::string& text, const char* what, const std::string& where, const VisitConfig& visit) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {  // syntax errors, and numbers beyond double's range (1e999)
    MINIDET_FAIL(what, ": ", where, " is not valid JSON (", e.what(), ")");
  }
  apply_json(root, what, visit);
}

void read_config_file(const std::string& path, const char* what, const VisitConfig& visit) {
  check_not_a_directory(what, path);
  std::ifstream in(path);
  MINIDET_CHECK(in.good(), what, ": cannot open '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  read_config_json(text.str(), what, "'" + path + "'", visit);
}

void set_config_value(const std::string& assignment, const char* what, const VisitConfig& visit) {
  const size_t eq = assignment.find('=');
  MINIDET_CHECK(eq != std::string::npos && eq > 0, what, ": --set expects dotted.key=value, got '", assignment, "'");
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  Json value;
  try {
    value = Json::parse(text);
  } catch (const Json::exception&) {
    value = text;  // a bare word is a string (frozen_batch_norm, annotations.json); 1e999 too, then refused by type
  }
  // "a.b.c" -> {"a": {"b": {"c": value}}}, built from the last part outwards.
  Json root = std::move(value);
  size_t end = key.size();
  while (true) {
    const size_t dot = key.rfind('.', end - 1);
    const size_t begin = dot == std::string::npos ? 0 : dot + 1;
    MINIDET_CHECK(begin < end, what, ": empty part in key '", key, "'");
    root = Json{{key.substr(begin, end - begin), std::move(root)}};
    if (dot == std::string::npos) break;
    end = dot;
  }
  apply_json(root, what, visit);
}

}  // namespace minidet
