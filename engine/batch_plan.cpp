// See batch_plan.h.
#include "engine/batch_plan.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_write.h"

namespace minidet::engine {

using nlohmann::json;
using ordered = nlohmann::ordered_json;  // lines keep the documented key order

BatchPlan::BatchPlan(std::string path, int64_t resume_step, dist::ProcessGroup& group)
    : path_(std::move(path)), group_(group) {
  if (!group_.is_main()) return;
  std::string kept;
  std::ifstream in(path_);
  for (std::string text; std::getline(in, text);) {
    json line;
    try {
      line = json::parse(text);
    } catch (const json::parse_error&) {
      continue;  // a line cut by a crash mid-write
    }
    if (line.is_object() && line.contains("step") && line.at("step").is_number_integer() &&
        line.at("step").get<int64_t>() <= resume_step)
      kept += text + "\n";
  }
  write_file_atomically("", path_, kept);  // a run killed while resuming keeps the plan it resumes
}

void BatchPlan::record(int64_t step, int64_t epoch, const data::Batch& batch) {
  pending_.insert(pending_.end(), {static_cast<double>(step), static_cast<double>(epoch),
                                   static_cast<double>(batch.size())});
  for (int64_t b = 0; b < batch.size(); ++b)
    pending_.insert(pending_.end(), {static_cast<double>(batch.indices[b]), static_cast<double>(batch.image_ids[b]),
                                     batch.flipped[b] ? 1.0 : 0.0});
  ++pending_steps_;
}

void BatchPlan::flush() {
  if (pending_steps_ == 0) return;
  // Every rank recorded the same steps, so rank 0 reads pending_steps_ steps from each rank's block in turn.
  const std::vector<double> all = group_.gather_to_main(pending_, "gather of the batch plan");
  const int64_t steps = pending_steps_;
  pending_.clear();
  pending_steps_ = 0;
  if (!group_.is_main()) return;
  std::vector<ordered> lines(static_cast<size_t>(steps));
  size_t at = 0;
  for (int rank = 0; rank < group_.size(); ++rank) {
    for (ordered& line : lines) {
      const auto step = static_cast<int64_t>(all.at(at)), epoch = static_cast<int64_t>(all.at(at + 1));
      const auto count = static_cast<int64_t>(all.at(at + 2));
      at += 3;
      if (rank == 0) {
        line = {{"step", step}, {"epoch", epoch}, {"indices", json::array()}, {"image_ids", json::array()},
                {"flipped", json::array()}};
      } else {
        MINIDET_CHECK(line.at("step") == step && line.at("epoch") == epoch, "batch plan: rank ", rank,
                      " recorded step ", step, " of epoch ", epoch, " where rank 0 has step ",
                      line.at("step").dump(), " of epoch ", line.at("epoch").dump());
      }
      for (int64_t b = 0; b < count; ++b, at += 3) {
        line["indices"].push_back(static_cast<int64_t>(all.at(at)));
        line["image_ids"].push_back(static_cast<int64_t>(all.at(at + 1)));
        line["flipped"].push_back(all.at(at + 2) != 0);
      }
    }
  }
  std::string text;
  for (const ordered& line : lines) text += line.dump() + "\n";
  append_to_file("", path_, text);
}

}  // namespace minidet::engine
