// metrics.jsonl and the plots drawn from it. One JSON object per line, so a run can be followed with
// `tail -f` and read by any tool:
//   {"type":"train","step":20,"loss":1.23,"loss_objectness":..,"loss_rpn_box_reg":..,"loss_classifier":..,
//    "loss_box_reg":..,"lr":0.003,"images_per_s":9.1,"elapsed_s":17.5}
//   {"type":"eval","step":250,"map50":0.93,"coco_ap":0.71,"coco_ap50":..,"coco_ap75":..,"ap_<class>":..}
// The log keeps every line in memory too, because loss.png and map.png are redrawn from the whole history
// at each evaluation. Resuming at step s keeps the lines up to s and drops any later ones (written after the
// checkpoint the run resumes from) and any line cut by a crash, so the file always tells the story of the
// run that the model holds: each logged step once. That rewrite replaces the file atomically, so a run
// killed while resuming keeps its history too.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "engine/evaluation.h"
#include "engine/loss_watch.h"

namespace minidet::engine {

struct TrainRecord {
  int64_t step = 0;
  double loss = 0;
  std::array<double, 4> parts{};  // kLossNames order
  double lr = 0;
  double images_per_s = 0;
  double elapsed_s = 0;  // since this process started training
  double eta_s = 0;      // the remaining steps at this session's mean speed
};

class MetricsLog {
 public:
  // Opens (creating) path; when resume_step >= 0, reads the existing lines back and keeps those with
  // step <= resume_step; otherwise starts the file empty.
  MetricsLog(std::string path, int64_t resume_step);

  void add_train(const TrainRecord& record);
  // train_s: seconds of training (this process, evaluations left out) up to this step.
  void add_eval(int64_t step, const Scores& scores, double train_s);
  // loss.png (the total and its parts, log scale) and map.png (mAP@0.5 and COCO AP), into `folder`.
  void draw_plots(const std::string& folder) const;

 private:
  void append_line(const std::string& line);

  std::string path_;
  std::vector<TrainRecord> train_;
  std::vector<std::array<double, 3>> evals_;  // step, map50, coco AP
};

}  // namespace minidet::engine
