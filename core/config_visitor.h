// ConfigVisitor: a config struct lists its keys once, in one visit function, and every JSON job walks that
// one list: writing (to_json), reading (from_json, load) and the command line's "--set dotted.key=value".
//
//   void visit(ConfigVisitor& v, Schedule& s) {
//     v.field("steps", s.steps);                          // an int64, a double, a bool, a string, a list...
//     v.choice("norm", s.norm, {{"batch_norm", NormKind::BatchNorm}, {"frozen_batch_norm", ...}});
//     v.object("train", [&] { visit(v, s.train); });      // a nested object: its keys are "train.<key>"
//   }
//
// Why one list walked three ways: a writer, a reader and an override parser written apart drift apart (a
// key written but never read, a type checked in one and not the other). Here a new key is one line, and a
// config that nests another (the run config holds the detector's) nests its visit function, so the whole
// tree is walked, and named, as one.
//
// Reading applies only the keys present, onto the struct as it stands (its defaults, or a loaded config),
// and checks every value's type. A key the visit function never named is refused by its full dotted name,
// so a typo never silently trains the default:
//   config: unknown key 'detector.rpn.train.post_nms_topn' (known keys: pre_nms_top_n, post_nms_top_n, ...)
// Writing emits every key, in visit order. Every message starts with the config's name (`what`). The JSON
// library stays inside config_visitor.cpp.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace minidet {

class ConfigVisitor {
 public:
  virtual ~ConfigVisitor() = default;

  virtual void field(const char* key, int64_t& value) = 0;
  virtual void field(const char* key, uint64_t& value) = 0;
  virtual void field(const char* key, double& value) = 0;
  virtual void field(const char* key, bool& value) = 0;
  virtual void field(const char* key, std::string& value) = 0;
  virtual void field(const char* key, std::vector<int64_t>& value) = 0;
  virtual void field(const char* key, std::vector<double>& value) = 0;
  virtual void field(const char* key, std::vector<std::string>& value) = 0;
  virtual void field(const char* key, std::array<double, 4>& value) = 0;

  // A nested object; body() visits its keys.
  virtual void object(const char* key, const std::function<void()>& body) = 0;

  // An enum, written as one of its names; any other name is refused, listing the names.
  template <class Enum>
  void choice(const char* key, Enum& value, const std::vector<std::pair<const char*, Enum>>& names) {
    std::vector<const char*> labels;
    size_t index = names.size();
    for (size_t i = 0; i < names.size(); ++i) {
      labels.push_back(names[i].first);
      if (names[i].second == value) index = i;
    }
    assert(index < names.size() && "ConfigVisitor::choice: the value has no name");
    choice_index(key, index, labels);
    value = names[index].second;
  }

 protected:
  // choice() without the enum type: the value is names[index].
  virtual void choice_index(const char* key, size_t& index, const std::vector<const char*>& names) = 0;
};

// A config's visit function, bound to one struct: [&](ConfigVisitor& v) { visit(v, config); }.
using VisitConfig = std::function<void(ConfigVisitor&)>;

// The JSON text of every key, in visit order.
std::string write_config_json(const VisitConfig& visit, int indent);

// Applies the keys of a JSON object text. `what` opens every message ("config", "DetectorConfig"); `where`
// names the text in a syntax error ("'runs/a/config.json'").
void read_config_json(const std::string& text, const char* what, const std::string& where, const VisitConfig& visit);

// read_config_json on a file's text; a missing file or a directory is refused naming the path.
void read_config_file(const std::string& path, const char* what, const VisitConfig& visit);

// Applies one "dotted.key=value" override, as the one-key file {"dotted": {"key": value}} would. The value is
// JSON; text that is not JSON is read as a string, so norm=frozen_batch_norm needs no quotes.
void set_config_value(const std::string& assignment, const char* what, const VisitConfig& visit);

}  // namespace minidet
