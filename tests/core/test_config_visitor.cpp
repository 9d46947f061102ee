// The shared config walker (core/config_visitor.h) on a toy config with every field kind and two levels of
// nesting: the JSON it writes, the round trip, partial files and --set overrides, and every refusal with the
// exact message the configs built on it (DetectorConfig, the minidet program's RunConfig) show their users.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config_visitor.h"
#include "tests/data/temp_dir.h"
#include "tests/support.h"

using namespace minidet;

namespace {

enum class Pool { Avg, Max };

struct ToyConfig {
  int64_t steps = 10;
  uint64_t seed = 0;
  double lr = 0.5;
  bool shuffle = true;
  std::string name = "toy";
  std::vector<int64_t> widths = {8, 16};
  std::vector<double> sizes = {1.5};
  std::vector<std::string> labels = {"cat"};
  std::array<double, 4> weights = {1, 1, 1, 1};
  Pool pool = Pool::Avg;
  int64_t depth = 1;  // head.depth
  double gain = 2.0;  // head.inner.gain
};

// "steps" after "name" on purpose: the writer keeps visit order, it does not sort.
void visit(ConfigVisitor& v, ToyConfig& c) {
  v.field("name", c.name);
  v.field("steps", c.steps);
  v.field("seed", c.seed);
  v.field("lr", c.lr);
  v.field("shuffle", c.shuffle);
  v.field("widths", c.widths);
  v.field("sizes", c.sizes);
  v.field("labels", c.labels);
  v.field("weights", c.weights);
  v.choice("pool", c.pool, {{"avg", Pool::Avg}, {"max", Pool::Max}});
  v.object("head", [&] {
    v.field("depth", c.depth);
    v.object("inner", [&] { v.field("gain", c.gain); });
  });
}

VisitConfig keys_of(ToyConfig& c) {
  return [&c](ConfigVisitor& v) { visit(v, c); };
}

std::string to_json(ToyConfig c) { return write_config_json(keys_of(c), -1); }

ToyConfig from_json(const std::string& text) {
  ToyConfig c;
  read_config_json(text, "toy", "the text", keys_of(c));
  return c;
}

// The message of the Error that `action` throws ("" when it does not throw).
template <class Action>
std::string message_of(Action&& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("values/config_visitor: writes every key in visit order and reads the text back to the same config") {
  CHECK(to_json(ToyConfig{}) ==
        R"({"name":"toy","steps":10,"seed":0,"lr":0.5,"shuffle":true,"widths":[8,16],"sizes":[1.5],)"
        R"("labels":["cat"],"weights":[1.0,1.0,1.0,1.0],"pool":"avg","head":{"depth":1,"inner":{"gain":2.0}}})");

  ToyConfig changed;
  changed.name = "other";
  changed.steps = -3;
  changed.seed = 18446744073709551615ull;  // the largest uint64 survives: it is written unsigned
  changed.lr = 1.0 / 3.0;
  changed.shuffle = false;
  changed.widths = {};
  changed.sizes = {0.25, 4};
  changed.labels = {"a", "b"};
  changed.weights = {10, 10, 5, 5};
  changed.pool = Pool::Max;
  changed.depth = 4;
  changed.gain = -0.125;
  const std::string text = to_json(changed);
  const ToyConfig back = from_json(text);
  CHECK(to_json(back) == text);
  CHECK(back.seed == changed.seed);
  CHECK(back.lr == changed.lr);
  CHECK(back.pool == Pool::Max);
  CHECK(back.widths.empty());
  CHECK(back.gain == -0.125);
  CHECK(write_config_json(keys_of(changed), 2).find("\n  \"steps\": -3,\n") != std::string::npos);
}

TEST_CASE("values/config_visitor: a partial file and --set change only the keys they name") {
  const ToyConfig partial = from_json(R"({"head": {"inner": {"gain": 7}}, "lr": 1})");
  CHECK(partial.gain == 7.0);
  CHECK(partial.lr == 1.0);  // an integer is a number too
  CHECK(partial.depth == 1);
  CHECK(partial.steps == 10);
  CHECK(partial.widths == std::vector<int64_t>{8, 16});

  ToyConfig c;
  c.steps = 99;  // set applies onto the config as it stands, not onto the defaults
  set_config_value("head.inner.gain=0.5", "toy", keys_of(c));
  set_config_value("widths=[1, 2, 3]", "toy", keys_of(c));
  set_config_value("pool=max", "toy", keys_of(c));             // a bare word is a string
  set_config_value("name=a=b", "toy", keys_of(c));             // the value is everything after the first '='
  set_config_value("head={\"depth\": 6}", "toy", keys_of(c));  // an object value sets the keys it holds
  CHECK(c.gain == 0.5);
  CHECK(c.widths == std::vector<int64_t>{1, 2, 3});
  CHECK(c.pool == Pool::Max);
  CHECK(c.name == "a=b");
  CHECK(c.depth == 6);
  CHECK(c.steps == 99);

  test::TempDir dir;
  const std::string path = dir.write("toy.json", R"({"steps": 5})");
  ToyConfig loaded;
  read_config_file(path, "toy", keys_of(loaded));
  CHECK(loaded.steps == 5);
}

TEST_CASE("errors/config_visitor: an unknown key is refused by its full dotted name, listing the keys known there") {
  ToyConfig c;
  CHECK(message_of([&] { read_config_json(R"({"head": {"inner": {"gian": 1}}})", "toy", "the text", keys_of(c)); }) ==
        "toy: unknown key 'head.inner.gian' (known keys: gain)");
  CHECK(message_of([&] { read_config_json(R"({"head": {"dpeth": 1}})", "toy", "the text", keys_of(c)); }) ==
        "toy: unknown key 'head.dpeth' (known keys: depth, inner)");
  CHECK(message_of([&] { read_config_json(R"({"step": 1})", "toy", "the text", keys_of(c)); }) ==
        "toy: unknown key 'step' (known keys: name, steps, seed, lr, shuffle, widths, sizes, labels, weights, pool, "
        "head)");
  // --set goes through the same reader, so an override's typo reads the same as a file's.
  CHECK(message_of([&] { set_config_value("head.inner.gian=1", "toy", keys_of(c)); }) ==
        "toy: unknown key 'head.inner.gian' (known keys: gain)");
  CHECK(message_of([&] { set_config_value("steps.count=1", "toy", keys_of(c)); }) ==
        "toy: steps must be an integer, got {\"count\":1}");
}

TEST_CASE("errors/config_visitor: a value of the wrong type names the key, what it must be and what it got") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"steps": 2.5})", "toy: steps must be an integer, got 2.5"},
      {R"({"steps": "3"})", "toy: steps must be an integer, got \"3\""},
      {R"({"seed": -1})", "toy: seed must be a non-negative integer, got -1"},
      {R"({"lr": "fast"})", "toy: lr must be a number, got \"fast\""},
      {R"({"shuffle": 1})", "toy: shuffle must be true or false, got 1"},
      {R"({"name": null})", "toy: name must be a string, got null"},
      {R"({"widths": 8})", "toy: widths must be a list, got 8"},
      {R"({"widths": [8, "x"]})", "toy: widths[1] must be an integer, got \"x\""},
      {R"({"labels": ["a", 2]})", "toy: labels[1] must be a string, got 2"},
      {R"({"weights": [1, 2]})", "toy: weights must be a list of 4 numbers, got [1,2]"},
      {R"({"weights": [1, 2, 3, true]})", "toy: weights[3] must be a number, got true"},
      {R"({"pool": "mean"})", "toy: pool must be \"avg\" or \"max\", got \"mean\""},
      {R"({"head": 3})", "toy: head must be an object, got 3"},
      {R"({"head": {"inner": {"gain": [1]}}})", "toy: head.inner.gain must be a number, got [1]"},
      {"[1, 2]", "toy: expected a JSON object at the top, got array"},
  };
  for (const auto& [text, message] : cases) {
    CAPTURE(text);
    ToyConfig c;
    CHECK(message_of([&] { read_config_json(text, "toy", "the text", keys_of(c)); }) == message);
  }
  // A list with a bad element leaves the field as it was.
  ToyConfig c;
  CHECK_THROWS(read_config_json(R"({"widths": [1, "x"]})", "toy", "the text", keys_of(c)));
  CHECK(c.widths == std::vector<int64_t>{8, 16});

  CHECK_THROWS_CONTAINING(read_config_json("{\"steps\": 3,", "toy", "'a.json'", keys_of(c)),
                          "toy: 'a.json' is not valid JSON (");
  CHECK_THROWS_CONTAINING(read_config_json(R"({"lr": 1e999})", "toy", "the text", keys_of(c)),
                          "toy: the text is not valid JSON (");
  test::TempDir dir;
  CHECK(message_of([&] { read_config_file(dir.file("missing.json"), "toy", keys_of(c)); }) ==
        "toy: cannot open '" + dir.file("missing.json") + "'");
  CHECK(message_of([&] { read_config_file(dir.path(), "toy", keys_of(c)); }) ==
        "toy: " + dir.path() + " is not a file");
}

TEST_CASE("errors/config_visitor: --set refuses an assignment without a key or with an empty part of the key") {
  ToyConfig c;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"steps", "toy: --set expects dotted.key=value, got 'steps'"},
      {"=3", "toy: --set expects dotted.key=value, got '=3'"},
      {"head..depth=3", "toy: empty part in key 'head..depth'"},
      {".steps=3", "toy: empty part in key '.steps'"},
      {"head.=3", "toy: empty part in key 'head.'"},
      {"lr=1e999", "toy: lr must be a number, got \"1e999\""},  // beyond double: read as a word, refused by type
  };
  for (const auto& [assignment, message] : cases) {
    CAPTURE(assignment);
    CHECK(message_of([&] { set_config_value(assignment, "toy", keys_of(c)); }) == message);
  }
  CHECK(to_json(c) == to_json(ToyConfig{}));  // nothing refused was applied
}
