// `minidet explain`: one training step of a detector on one held-out image, written as the backward explorer's
// page (autograd/backward_html.h): play the backward pass node by node in a browser.
//
// The detector is a checkpoint's (--checkpoint: a trained one) or a fresh one of the default config, or of
// --config and --set. The step is FasterRCNN::forward_train on the image and the backward of the total loss,
// as the training loop runs them (train mode, the step's samplers seeded by --seed); the optimizer does not
// step, so nothing is changed. Every node remembers the module that made it (autograd/scope.h), every
// parameter its dotted name and every loss its name, so the page groups, labels and searches by them.
//
// Recording works anywhere; the page needs Graphviz at build time. Where it is missing (a GPU server, say)
// --record writes the record as JSON, and --from-record turns such a file into the page on another machine.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "autograd/backward_html.h"
#include "autograd/backward_record.h"
#include "autograd/engine.h"
#include "autograd/scope.h"
#include "core/error.h"
#include "core/generator.h"
#include "data/loader/loader.h"
#include "engine/checkpoints.h"
#include "engine/datasets.h"
#include "examples/minidet/commands.h"

namespace minidet::cli {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MINIDET_CHECK(in.good(), "cannot read '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  MINIDET_CHECK(out.good(), "cannot write '", path, "'");
}

void write_page(const autograd::BackwardRecord& record, const std::string& path) {
  autograd::write_backward_html(record, path);
  std::printf("page         %s (%zu nodes): open it in a browser\n", path.c_str(), record.nodes.size());
}

// The detector, on `device` in train mode, with its config (classes filled in from the data) and its data.
std::unique_ptr<models::FasterRCNN> make_model(const ExplainArgs& args, Device device, RunConfig& config,
                                               Datasets& data) {
  if (!args.checkpoint.empty()) {
    const RunCheckpoint checkpoint = load_run_checkpoint(checkpoint_path(args.checkpoint, true));
    config = checkpoint.config;
    data = open_datasets(config, false);
    auto model = load_model(checkpoint, device);
    model->train();
    return model;
  }
  if (!args.config_path.empty()) config = RunConfig::load(args.config_path);
  for (const std::string& assignment : args.overrides) config.set(assignment);
  config.validate();
  data = open_datasets(config, true);
  adopt_classes(config, *data.train);
  Generator init(config.schedule.seed);
  auto model = std::make_unique<models::FasterRCNN>(config.detector, &init);
  model->to(device);
  return model;
}

}  // namespace

int run_explain(const ExplainArgs& args) {
  MINIDET_CHECK(!args.out.empty() || !args.record.empty(), "explain: give --out PAGE.html, --record RECORD.json or both");
  if (!args.from_record.empty()) {
    MINIDET_CHECK(args.checkpoint.empty() && args.config_path.empty() && args.record.empty(),
                  "explain: --from-record makes the page of an existing record; leave out --checkpoint, --config and "
                  "--record");
    MINIDET_CHECK(!args.out.empty(), "explain: --from-record needs --out PAGE.html");
    write_page(autograd::BackwardRecord::from_json(read_file(args.from_record)), args.out);
    return 0;
  }
  MINIDET_CHECK(args.out.empty() || autograd::backward_html_available(),
                "explain: this build has no Graphviz, which lays out the page (apt-get install libgraphviz-dev, then "
                "reconfigure); --record RECORD.json still works, and `minidet explain --from-record RECORD.json "
                "--out PAGE.html` makes the page on a machine that has it");
  set_threads(args.threads);
  const Device device = pick_device(args.device);
  RunConfig config;
  Datasets data;
  std::unique_ptr<models::FasterRCNN> model = make_model(args, device, config, data);
  const int64_t count = data.val->size();
  MINIDET_CHECK(args.image_index >= 0 && args.image_index < count, "explain: --image-index ", args.image_index,
                " is not an image of the held-out split, which has ", count, " (0 to ", count - 1, ")");
  const data::Batch batch = data::collate({data.val->get(args.image_index)}, {args.image_index});

  for (const auto& [name, p] : model->named_parameters()) autograd::set_name(p, name);
  autograd::ScopeRecordingGuard scopes;  // every node remembers its module
  Generator step(args.seed);
  models::Losses losses = model->forward_train(batch, &step);
  for (const auto& [name, loss] : losses) autograd::set_name(loss, name);
  const Tensor total = models::FasterRCNN::total_loss(losses);
  autograd::set_name(total, "total loss");

  autograd::RecordOptions options;
  char title[256];
  std::snprintf(title, sizeof title, "one training step of %s on held-out image %lld, %s",
                args.checkpoint.empty() ? "a fresh detector" : args.checkpoint.c_str(),
                static_cast<long long>(args.image_index), device.str().c_str());
  options.title = title;
  const autograd::BackwardRecord record = autograd::record_backward({total}, options);
  std::printf("step         total loss %.6f:", total.item<double>());
  for (const auto& [name, loss] : losses) std::printf(" %s %.4f", name.c_str(), loss.item<double>());
  std::printf("\nbackward     %zu nodes on %s\n", record.nodes.size(), device.str().c_str());
  if (!args.record.empty()) {
    write_file(args.record, record.to_json());
    std::printf("record       %s\n", args.record.c_str());
  }
  if (!args.out.empty()) write_page(record, args.out);
  return 0;
}

}  // namespace minidet::cli
