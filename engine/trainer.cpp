// Trainer: what a run builds, and the three parts of its step (see trainer.h).
#include "engine/trainer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "data/transforms/transforms.h"
#include "ops/shape/cat.h"

namespace minidet::engine {

namespace {

data::LoaderOptions loader_options(const Schedule& s, const dist::ProcessGroup& group) {
  data::LoaderOptions options;
  options.batch_size = s.batch / group.size();
  options.num_shards = group.size();
  options.shard_index = group.rank();
  options.seed = s.seed;
  options.drop_last = true;
  options.transform = data::random_horizontal_flip(s.flip_probability);
  return options;
}

// The error for a non-finite loss: the step, the parts that are not finite and, in anomaly mode, the op
// whose backward produced the first NaN (found by running backward once more under the anomaly checks).
[[noreturn]] void fail_non_finite(int64_t step, const std::array<double, 5>& values, const Tensor* total) {
  std::string parts;
  for (size_t i = 0; i < kLossNames.size(); ++i)
    if (!std::isfinite(values[i + 1]))
      parts += std::string(parts.empty() ? "" : ", ") + kLossNames[i] + " = " +
               (std::isnan(values[i + 1]) ? "nan" : values[i + 1] > 0 ? "inf" : "-inf");
  std::string op = " (run with --detect-anomaly to find the op)";
  if (total) {
    op = " (anomaly mode found no NaN in backward)";
    try {
      total->backward();
    } catch (const Error& e) {
      op = "; " + e.message();
    }
  }
  MINIDET_FAIL("step ", step, ": the loss is not finite (", parts.empty() ? "the total" : parts, ")", op);
}

}  // namespace

Trainer::Trainer(const RunConfig& config, const data::Dataset& train, const Device& device,
                 dist::ProcessGroup& group, bool detect_anomaly)
    : config_(config),
      device_(device),
      group_(group),
      detect_anomaly_(detect_anomaly),
      watch_(config.schedule.log_every + 1, device) {
  const Schedule& s = config_.schedule;
  MINIDET_CHECK(s.batch % group.size() == 0, "schedule.batch ", s.batch, " is the global batch: it must be a multiple ",
                "of the ", group.size(), " ranks");
  generator_ = std::make_unique<Generator>(s.seed);
  model_ = std::make_unique<models::FasterRCNN>(config_.detector, generator_.get());
  model_->to(device_);  // before the optimizer, which keeps the parameters it is given
  // A graph replays its kernels without the host: SyncBatchNorm's all-reduces between ranks cannot be in one.
  const bool synced_norms = config_.detector.backbone.norm == models::NormKind::SyncBatchNorm && group.size() > 1;
  if (device_.is_cuda() && s.cuda_graphs && !synced_norms) graphs_ = std::make_unique<CudaGraphs>(*model_);
  optimizer_ = std::make_unique<nn::Adam>(std::vector<nn::ParamGroup>{{model_->parameters(), s.lr, s.weight_decay}},
                                          nn::AdamOptions{0.9, 0.999, 1e-8, /*decoupled_weight_decay=*/true});
  scheduler_ = std::make_unique<nn::WarmupCosineLR>(*optimizer_, s.steps, s.min_lr_factor,
                                                    std::min(s.warmup, s.steps / 5));
  loader_ = std::make_unique<data::DataLoader>(train, loader_options(s, group));
  MINIDET_CHECK(loader_->batches_per_epoch() >= 1, "the training data has ", train.size(),
                " images, fewer than one batch of ", s.batch);
}

Trainer::~Trainer() = default;

int64_t Trainer::restore(const nn::Checkpoint& checkpoint) {
  const nn::TrainingProgress progress =
      nn::restore_training_state(checkpoint, *model_, optimizer_.get(), scheduler_.get(), generator_.get());
  loader_->start_epoch(progress.epoch);
  // Batches are drawn lazily (a new epoch starts when the previous one runs dry), so after `step` steps the
  // loader is in `epoch` with step - epoch * batches_per_epoch of its batches consumed.
  const int64_t consumed = progress.step - progress.epoch * loader_->batches_per_epoch();
  MINIDET_CHECK(consumed >= 0 && consumed <= loader_->batches_per_epoch(), "step ", progress.step, " and epoch ",
                progress.epoch, " do not fit ", loader_->batches_per_epoch(), " batches per epoch");
  for (int64_t i = 0; i < consumed; ++i) loader_->next();
  return progress.step;
}

nn::Checkpoint Trainer::capture(int64_t step) const {
  return nn::capture_training_state(*model_, optimizer_.get(), scheduler_.get(), generator_.get(),
                                    {step, loader_->epoch()});
}

const data::Batch& Trainer::forward(int64_t step) {
  std::optional<data::Batch> next = loader_->next();
  if (!next) {  // the epoch ran dry: the next one, reshuffled
    loader_->start_epoch(loader_->epoch() + 1);
    next = loader_->next();
  }
  return forward(step, std::move(*next));
}

const data::Batch& Trainer::forward(int64_t step, data::Batch batch) {
  step_ = step;
  batch_ = std::move(batch);
  const models::Losses losses = model_->forward_train(batch_, generator_.get());
  total_ = models::FasterRCNN::total_loss(losses);
  std::vector<Tensor> parts{total_};
  for (const char* name : kLossNames) parts.push_back(losses.at(name).detach());
  watch_.record(step, stack(parts).detach());
  return batch_;
}

std::vector<LossRow> Trainer::read_losses() {
  std::vector<LossRow> rows = watch_.take();
  if (group_.size() > 1) {  // every rank sees the same values, so every rank takes the same decisions
    std::vector<double> flat;
    for (const LossRow& row : rows) flat.insert(flat.end(), row.values.begin(), row.values.end());
    flat = group_.all_reduce_sum(flat, "all-reduce of the loss values");
    for (size_t r = 0; r < rows.size(); ++r)
      for (size_t i = 0; i < rows[r].values.size(); ++i)
        rows[r].values[i] = flat[r * rows[r].values.size() + i] / group_.size();
  }
  for (const LossRow& row : rows)
    if (!std::isfinite(row.values[0])) {
      std::optional<dist::DistributedDataParallel::NoSync> local;  // anomaly mode's extra backward stays local
      if (ddp_) local.emplace(*ddp_);
      fail_non_finite(row.step, row.values, detect_anomaly_ && row.step == step_ ? &total_ : nullptr);
    }
  return rows;
}

void Trainer::backward_and_update() {
  // Made here rather than in the constructor: after restore(), so that its broadcast from rank 0 finds
  // every rank holding the checkpoint's weights.
  if (!ddp_) ddp_ = std::make_unique<dist::DistributedDataParallel>(*model_, group_);
  optimizer_->zero_grad();
  ddp_->backward(total_);
  optimizer_->step();
  scheduler_->step();
}

void Trainer::read_losses_if_due() {
  if (reads_every_step() || watch_.pending() >= config_.schedule.log_every) read_losses();
}

const data::Batch& Trainer::step(int64_t n) {
  forward(n);
  read_losses_if_due();
  backward_and_update();
  return batch_;
}

const data::Batch& Trainer::step(int64_t n, data::Batch batch) {
  forward(n, std::move(batch));
  read_losses_if_due();
  backward_and_update();
  return batch_;
}

}  // namespace minidet::engine
