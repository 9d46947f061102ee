// RunConfig's JSON form. visit_run lists every key once, the detector's by nesting DetectorConfig::visit_keys;
// the shared walkers of core/config_visitor.h write, read and override through it, so a key's full dotted
// name ("detector.rpn.train.post_nms_top_n") is the same in config.json, in --set and in every message.
#include "engine/run_config.h"

#include <cmath>

#include "core/config_visitor.h"
#include "core/error.h"
#include "core/factories.h"

namespace minidet::engine {

namespace {

// The name that opens every message about the run's config.
constexpr const char* kWhat = "config";

// Sections in the order of the header's list, so config.json reads like it.
void visit_run(ConfigVisitor& v, RunConfig& c) {
  v.object("schedule", [&] {
    Schedule& s = c.schedule;
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
  });
  v.object("data", [&] {
    DataConfig& d = c.data;
    v.field("image_size", d.image_size);
    v.choice("synthetic", d.synthetic,
             {{"shapes", SyntheticData::kShapes}, {"rotated_shapes", SyntheticData::kRotatedShapes}});
    v.field("train_images", d.train_images);
    v.field("test_images", d.test_images);
    v.field("min_thickness", d.min_thickness);
    v.field("train_json", d.train_json);
    v.field("train_images_dir", d.train_images_dir);
    v.field("val_json", d.val_json);
    v.field("val_images_dir", d.val_images_dir);
  });
  v.object("detector", [&] { c.detector.visit_keys(v); });
  v.field("classes", c.classes);
  v.field("category_ids", c.category_ids);
}

}  // namespace

std::string RunConfig::to_json(int indent) const {
  RunConfig fields = *this;  // visit_run takes the fields by reference, for the reader; the writer only reads
  return write_config_json([&](ConfigVisitor& v) { visit_run(v, fields); }, indent);
}

RunConfig RunConfig::from_json(const std::string& text, const std::string& where) {
  RunConfig config;
  read_config_json(text, kWhat, where, [&](ConfigVisitor& v) { visit_run(v, config); });
  return config;
}

RunConfig RunConfig::load(const std::string& path) {
  RunConfig config;
  read_config_file(path, kWhat, [&](ConfigVisitor& v) { visit_run(v, config); });
  return config;
}

void RunConfig::set(const std::string& assignment) {
  // Every key a user sets lives in a section: a bare "steps=300" gets this hint rather than "unknown key".
  const size_t eq = assignment.find('=');
  const std::string key = assignment.substr(0, eq);
  MINIDET_CHECK(eq == std::string::npos || eq == 0 || key.find('.') != std::string::npos,
                "--set ", key, ": name a section (schedule., data. or detector.), e.g. schedule.steps=300");
  set_config_value(assignment, kWhat, [&](ConfigVisitor& v) { visit_run(v, *this); });
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
  MINIDET_CHECK(std::isfinite(d.min_thickness) && d.min_thickness >= 1.0,
                "config: data.min_thickness must be at least 1 pixel, got ", d.min_thickness);
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

}  // namespace minidet::engine
