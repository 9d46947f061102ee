// See metrics.h. Lines are written one by one (one write(2) each), so an interrupted run loses nothing it
// printed, and a write that fails (disk full) stops the run naming the file and the reason.
#include "engine/metrics.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_write.h"
#include "data/image/draw.h"
#include "data/image/image_io.h"
#include "data/image/plot.h"

namespace minidet::engine {

using nlohmann::json;
using ordered = nlohmann::ordered_json;  // lines keep the documented key order

namespace {

// JSON has no NaN: a non-finite value (a diverged loss, a class without AP) is written as null.
ordered number(double value) { return std::isfinite(value) ? ordered(value) : ordered(nullptr); }
double read_number(const json& line, const char* key) {
  return line.contains(key) && line.at(key).is_number() ? line.at(key).get<double>() : NAN;
}

}  // namespace

MetricsLog::MetricsLog(std::string path, int64_t resume_step) : path_(std::move(path)) {
  std::vector<std::string> kept;
  if (resume_step >= 0) {
    std::ifstream in(path_);
    std::string text;
    while (std::getline(in, text)) {
      if (text.empty()) continue;
      json line;
      try {
        line = json::parse(text);
      } catch (const json::parse_error&) {
        continue;  // a line cut by a crash mid-write
      }
      if (!line.is_object() || !line.contains("step") || !line.at("step").is_number_integer()) continue;
      const int64_t step = line.at("step").get<int64_t>();
      if (step > resume_step) continue;
      kept.push_back(text);
      if (line.value("type", "") == "train") {
        TrainRecord r;
        r.step = step;
        r.loss = read_number(line, "loss");
        for (size_t i = 0; i < kLossNames.size(); ++i) r.parts[i] = read_number(line, kLossNames[i]);
        r.lr = read_number(line, "lr");
        train_.push_back(r);
      } else if (line.value("type", "") == "eval") {
        evals_.push_back({static_cast<double>(step), read_number(line, "map50"), read_number(line, "coco_ap")});
      }
    }
  }
  // Replaced atomically: a run killed while resuming must not lose the history it is resuming.
  std::string text;
  for (const std::string& line : kept) text += line + "\n";
  write_file_atomically("", path_, text);
}

void MetricsLog::append_line(const std::string& line) { append_to_file("", path_, line + "\n"); }

void MetricsLog::add_train(const TrainRecord& r) {
  ordered line = {{"type", "train"}, {"step", r.step}, {"loss", number(r.loss)}};
  for (size_t i = 0; i < kLossNames.size(); ++i) line[kLossNames[i]] = number(r.parts[i]);
  line["lr"] = r.lr;
  line["images_per_s"] = number(r.images_per_s);
  line["elapsed_s"] = r.elapsed_s;
  append_line(line.dump());
  train_.push_back(r);
}

void MetricsLog::add_eval(int64_t step, const Scores& s, double train_s) {
  ordered line = {{"type", "eval"},          {"step", step},           {"map50", number(s.map50)},
               {"coco_ap", number(s.coco[0])}, {"coco_ap50", number(s.coco[1])}, {"coco_ap75", number(s.coco[2])},
               {"coco_ar100", number(s.coco[8])}};
  for (const auto& [name, ap] : s.class_ap) line["ap50_" + name] = number(ap);
  line["train_s"] = train_s;
  append_line(line.dump());
  evals_.push_back({static_cast<double>(step), s.map50, s.coco[0]});
}

void MetricsLog::draw_plots(const std::string& folder) const {
  std::vector<data::PlotSeries> losses(1 + kLossNames.size());
  losses[0].name = "loss";
  for (size_t i = 0; i < kLossNames.size(); ++i) losses[i + 1].name = kLossNames[i];
  for (size_t s = 0; s < losses.size(); ++s) losses[s].color = data::class_color(static_cast<int64_t>(s) + 1);
  for (const TrainRecord& r : train_) {
    for (size_t s = 0; s < losses.size(); ++s) {
      losses[s].x.push_back(static_cast<double>(r.step));
      losses[s].y.push_back(s == 0 ? r.loss : r.parts[s - 1]);
    }
  }
  data::PlotOptions loss_options;
  loss_options.title = "training losses";
  loss_options.y_label = "loss";
  loss_options.log_y = true;
  data::write_png(data::line_plot(losses, loss_options), folder + "/loss.png");

  std::vector<data::PlotSeries> scores(2);
  scores[0].name = "mAP@0.5 (VOC)";
  scores[1].name = "AP@[0.5:0.95] (COCO)";
  for (size_t s = 0; s < scores.size(); ++s) scores[s].color = data::class_color(static_cast<int64_t>(s) + 1);
  for (const auto& [step, map50, coco_ap] : evals_) {
    scores[0].x.push_back(step);
    scores[0].y.push_back(map50);
    scores[1].x.push_back(step);
    scores[1].y.push_back(coco_ap);
  }
  data::PlotOptions map_options;
  map_options.title = "held-out accuracy";
  map_options.y_label = "AP";
  map_options.y_min = 0;
  map_options.y_max = 1;
  data::write_png(data::line_plot(scores, map_options), folder + "/map.png");
}

}  // namespace minidet::engine
