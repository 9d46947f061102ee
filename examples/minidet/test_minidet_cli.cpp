// End-to-end tests of the minidet program: they run the built binary (MINIDET_EXE) on a tiny config, kept
// small enough to run with the unit tests, and check what it prints and writes. A program test, not a unit
// test: it lives next to the program because tests/ may not depend on examples/. The refusals (bad flags,
// files and checkpoints) are in test_minidet_errors.cpp, the crash safety in test_minidet_crash.cpp.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/factories.h"
#include "data/coco/coco_dataset.h"
#include "data/image/image_io.h"
#include "data/loader/loader.h"
#include "data/shapes/shapes_dataset.h"
#include "examples/minidet/cli_test_support.h"
#include "engine/datasets.h"
#include "nn/checkpoint/checkpoint.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace minidet;

namespace {

using namespace minidet_cli_test;

void check_run_folder(const fs::path& run) {
  for (const char* name : {"config.json", "metrics.jsonl", "loss.png", "map.png", "last.ckpt", "best.ckpt"}) {
    CAPTURE(name);
    CHECK(fs::exists(run / name));
  }
  const json config = json::parse(read_text(run / "config.json"));
  CHECK(config.at("schedule").at("steps") == 6);
  CHECK(config.at("classes") == json({"square", "circle", "triangle"}));
  const std::vector<json> lines = read_jsonl(run / "metrics.jsonl");
  std::vector<int64_t> eval_steps;
  int64_t train_lines = 0;
  for (const json& line : lines) {
    if (line.at("type") == "eval") {
      eval_steps.push_back(line.at("step"));
      CHECK(line.at("map50").is_number());
      CHECK(line.at("coco_ap").is_number());
      CHECK(line.at("train_s").get<double>() >= 0);  // training time so far, evaluations left out
    } else {
      ++train_lines;
      for (const char* key : {"loss", "loss_objectness", "loss_rpn_box_reg", "loss_classifier", "loss_box_reg", "lr"})
        CHECK(line.at(key).is_number());
    }
  }
  CHECK(train_lines == 6);
  CHECK(eval_steps == std::vector<int64_t>{3, 6});
  for (const char* plot : {"loss.png", "map.png"}) CHECK(!data::read_png((run / plot).string()).empty());
  int64_t pictures = 0;
  for (const auto& entry : fs::directory_iterator(run / "detections")) {
    CHECK(!data::read_png(entry.path().string()).empty());
    ++pictures;
  }
  CHECK(pictures == 2);
  for (const char* checkpoint : {"last.ckpt", "best.ckpt"}) {
    const nn::Checkpoint c = nn::load_checkpoint((run / checkpoint).string());
    CHECK(c.has("minidet.config"));
    CHECK(c.has("progress.step"));
  }
  CHECK(nn::load_checkpoint((run / "last.ckpt").string()).get("progress.step").item<int64_t>() == 6);
}

// batches.jsonl against a loader built as `minidet train` builds it for kTinyConfig (6 images of 64 px,
// batch 2, seed 0, flips at p 0.5, drop_last): the same indices, image ids and flips at every step, epochs
// rolling over after 3 steps. The flips are also checked on the pixels, so the test does not only trust
// the flag: a batch image is the dataset's image, mirrored exactly where the plan says so.
void check_batch_plan(const fs::path& run) {
  data::ShapesOptions shapes;
  shapes.image_width = shapes.image_height = 64;
  shapes.train_images = 6;
  shapes.test_images = 4;
  const data::ShapesDataset dataset(data::Split::kTrain, shapes);
  data::LoaderOptions options;
  options.batch_size = 2;
  options.drop_last = true;
  options.transform = data::random_horizontal_flip(0.5);
  data::DataLoader loader(dataset, options);
  const std::vector<json> plan = read_jsonl(run / "batches.jsonl");
  REQUIRE(plan.size() == 6);
  int64_t flips = 0;
  for (int64_t step = 1; step <= 6; ++step) {
    CAPTURE(step);
    std::optional<data::Batch> batch = loader.next();
    if (!batch) {
      loader.start_epoch(loader.epoch() + 1);
      batch = loader.next();
    }
    const json& line = plan[step - 1];
    CHECK(line.at("step") == step);
    CHECK(line.at("epoch") == loader.epoch());
    CHECK(line.at("indices").get<std::vector<int64_t>>() == batch->indices);
    CHECK(line.at("image_ids").get<std::vector<int64_t>>() == batch->image_ids);
    const std::vector<bool> flipped = line.at("flipped").get<std::vector<bool>>();
    CHECK(flipped == batch->flipped);
    REQUIRE(flipped.size() == 2);
    for (int64_t b = 0; b < 2; ++b) {
      data::Sample sample = dataset.get(batch->indices[b]);
      if (flipped[b]) sample = data::horizontal_flip(std::move(sample));
      const data::Batch alone = data::collate({sample}, {batch->indices[b]});
      CHECK(alone.images.select(0, 0).to_vector<float>() == batch->images.select(0, b).to_vector<float>());
      flips += flipped[b];
    }
  }
  CHECK(flips > 0);  // seed 0 flips some and keeps some: both cases are checked
  CHECK(flips < 12);
}

}  // namespace

TEST_CASE("values/minidet: --help for the program and each subcommand") {
  const fs::path folder = fresh_folder("help");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--help", "train"}, {"train --help", "--resume"}, {"eval --help", "--checkpoint"}, {"eval --help", "--results"},
      {"detect --help", "--out"}, {"explain --help", "--from-record"}};
  for (const auto& [arguments, expected] : cases) {
    CAPTURE(arguments);
    const Result r = run_minidet(folder, arguments);
    CHECK(r.code == 0);
    CHECK(r.out.find(expected) != std::string::npos);
  }
}

TEST_CASE("values/minidet: train, stop, resume bit for bit, eval and detect end to end") {
  const fs::path folder = fresh_folder("end_to_end");
  write_text(folder / "tiny.json", kTinyConfig);

  // 6 steps in one go.
  const Result straight = run_minidet(folder, "train --config tiny.json --device cpu --threads 1 --out straight");
  REQUIRE_MESSAGE(straight.code == 0, straight.err);
  CHECK(straight.err.empty());
  CHECK(straight.out.find("run folder   straight") != std::string::npos);
  CHECK(straight.out.find("evaluation at step 3") != std::string::npos);
  check_run_folder(folder / "straight");
  check_batch_plan(folder / "straight");

  // 4 steps, then a resume to 6: the same losses, bit for bit (the JSON numbers round-trip exactly).
  const Result first = run_minidet(folder, "train --config tiny.json --device cpu --threads 1 --out split --stop-after 4");
  REQUIRE_MESSAGE(first.code == 0, first.err);
  CHECK(first.out.find("resume with: minidet train --resume split") != std::string::npos);
  CHECK(read_jsonl(folder / "split" / "batches.jsonl").size() == 4);
  // As if a crash had come after step 5's plan line and in the middle of step 6's: the resume from step 4
  // drops both and writes steps 5 and 6 again.
  append_text(folder / "split" / "batches.jsonl",
              "{\"step\":5,\"epoch\":9,\"indices\":[],\"image_ids\":[],\"flipped\":[]}\n{\"step\":6,\"ep");
  const Result second = run_minidet(folder, "train --resume split --device cpu --threads 1");
  REQUIRE_MESSAGE(second.code == 0, second.err);
  CHECK(second.out.find("resuming, steps 5..6") != std::string::npos);
  check_run_folder(folder / "split");
  check_batch_plan(folder / "split");
  CHECK(read_text(folder / "split" / "batches.jsonl") == read_text(folder / "straight" / "batches.jsonl"));
  const std::vector<json> expected = loss_lines(folder / "straight" / "metrics.jsonl");
  const std::vector<json> resumed = loss_lines(folder / "split" / "metrics.jsonl");
  REQUIRE(expected.size() == 6);
  REQUIRE(resumed.size() == 6);
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(resumed[i].dump() == expected[i].dump());
  }

  // eval: the COCO summary and the VOC table, and a results file.
  const Result eval = run_minidet(folder, "eval --checkpoint straight --device cpu --out results.json");
  REQUIRE_MESSAGE(eval.code == 0, eval.err);
  CHECK(eval.out.find("mAP@0.5") != std::string::npos);
  CHECK(eval.out.find("Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ]") != std::string::npos);
  CHECK(json::parse(read_text(folder / "results.json")).is_array());

  // detect on two synthetic images written as PNG files.
  const data::ShapesDataset shapes(data::Split::kTest, {});
  data::write_png(shapes.get(0).image, (folder / "a.png").string());
  data::write_png(shapes.get(1).image, (folder / "b.png").string());
  const Result detect = run_minidet(folder, "detect --checkpoint straight/last.ckpt a.png b.png --out found "
                                        "--score-threshold 0.01 --device cpu");
  REQUIRE_MESSAGE(detect.code == 0, detect.err);
  CHECK(!data::read_png((folder / "found" / "a.png").string()).empty());
  CHECK(!data::read_png((folder / "found" / "b.png").string()).empty());
  CHECK(json::parse(read_text(folder / "found" / "detections.json")).is_array());
}

// Runs export_shapes_coco with `arguments` in `folder`; true when it succeeded.
bool export_shapes(const fs::path& folder, const std::string& arguments) {
  const std::string command = "cd '" + folder.string() + "' && '" + EXPORT_SHAPES_COCO_EXE + "' " + arguments +
                              " > export.txt 2>&1";
  return std::system(command.c_str()) == 0;
}

// The JSON line of `minidet eval --json` (no other line of its output holds a '{'; --draw's lines follow it).
json last_json_line(const std::string& out) {
  const size_t start = out.rfind('{');
  REQUIRE_MESSAGE(start != std::string::npos, out);
  return json::parse(out.substr(start, out.find('\n', start) - start));
}

// The twin (bench/detector_torch.py --data) trains on export_shapes_coco's folder: it must hold the very
// images, boxes and labels that `minidet train` draws with its default data config, and PNG keeps the
// pixels exactly. An image depends only on (seed, split, index), so a few images stand for the 2000 + 200.
TEST_CASE("values/minidet: export_shapes_coco writes the images, boxes and labels minidet train uses") {
  const fs::path folder = fresh_folder("export");
  REQUIRE(export_shapes(folder, "--size 128 --train 5 --test 3 --seed 0 --out shapes"));
  engine::RunConfig config;  // the defaults: 128 px, 3 classes, dataset seed 0
  config.data.train_images = 5;
  config.data.test_images = 3;
  const engine::Datasets opened = engine::open_datasets(config, true);
  for (const auto& [split, drawn] : {std::pair{"train", opened.train.get()}, std::pair{"test", opened.val.get()}}) {
    CAPTURE(split);
    const data::CocoDataset exported((folder / "shapes" / (std::string(split) + ".json")).string(),
                                     (folder / "shapes" / split).string());
    REQUIRE(exported.size() == drawn->size());
    CHECK(exported.class_names() == drawn->class_names());
    for (int64_t label = 1; label <= 3; ++label) CHECK(exported.category_id(label) == drawn->category_id(label));
    for (int64_t i = 0; i < drawn->size(); ++i) {
      CAPTURE(i);
      const data::Sample a = drawn->get(i), b = exported.get(i);
      CHECK(b.image_id == a.image_id);
      CHECK(b.image_id == i + 1);
      CHECK(exported.file_name(i) == drawn->file_name(i));
      CHECK(b.image == a.image);
      CHECK(b.boxes == a.boxes);
      CHECK(b.labels == a.labels);
      // And as the loader hands them to the model: float32 pixels value / 255, bit for bit.
      CHECK(data::collate({b}, {i}).images.to_vector<float>() == data::collate({a}, {i}).images.to_vector<float>());
    }
  }
}

// End to end: `minidet train` on the exported folder trains exactly as on the synthetic shapes (same losses,
// bit for bit, same batches and flips, same evaluations), so the folder is the shapes and nothing else.
TEST_CASE("values/minidet: training on the exported COCO folder matches training on the shapes bit for bit") {
  const fs::path folder = fresh_folder("export_train");
  write_text(folder / "tiny.json", kTinyConfig);
  REQUIRE(export_shapes(folder, "--size 64 --train 6 --test 4 --seed 0 --out shapes"));
  const Result shapes = run_minidet(folder, "train --config tiny.json --device cpu --threads 1 --out on_shapes");
  REQUIRE_MESSAGE(shapes.code == 0, shapes.err);
  const Result coco = run_minidet(folder, "train --config tiny.json --device cpu --threads 1 --out on_coco "
                                          "--train-json shapes/train.json --train-images shapes/train "
                                          "--val-json shapes/test.json --val-images shapes/test");
  REQUIRE_MESSAGE(coco.code == 0, coco.err);
  CHECK(read_text(folder / "on_coco" / "batches.jsonl") == read_text(folder / "on_shapes" / "batches.jsonl"));
  const std::vector<json> expected = loss_lines(folder / "on_shapes" / "metrics.jsonl");
  const std::vector<json> got = loss_lines(folder / "on_coco" / "metrics.jsonl");
  REQUIRE(expected.size() == 6);
  REQUIRE(got.size() == 6);
  for (size_t i = 0; i < expected.size(); ++i) CHECK(got[i].dump() == expected[i].dump());
  const auto eval_lines = [](const fs::path& metrics) {  // without train_s, a timing
    std::vector<std::string> lines;
    for (json line : read_jsonl(metrics)) {
      if (line.at("type") != "eval") continue;
      line.erase("train_s");
      lines.push_back(line.dump());
    }
    return lines;
  };
  const std::vector<std::string> expected_evals = eval_lines(folder / "on_shapes" / "metrics.jsonl");
  CHECK(expected_evals.size() == 2);
  CHECK(eval_lines(folder / "on_coco" / "metrics.jsonl") == expected_evals);

  // `minidet eval --results`, which scores the twin's results files, gives the numbers `minidet train` logged
  // at its last evaluation, to the last bit, from the same model's COCO results file.
  const Result eval = run_minidet(folder, "eval --checkpoint on_coco/last.ckpt --device cpu --out results.json");
  REQUIRE_MESSAGE(eval.code == 0, eval.err);
  const Result scored = run_minidet(folder, "eval --gt shapes/test.json --results results.json --json");
  REQUIRE_MESSAGE(scored.code == 0, scored.err);
  const json numbers = last_json_line(scored.out);
  const json logged = read_jsonl(folder / "on_coco" / "metrics.jsonl").back();
  REQUIRE(logged.at("type") == "eval");
  for (const char* key : {"map50", "coco_ap", "coco_ap50", "coco_ap75", "coco_ar100"}) {
    CAPTURE(key);
    CHECK(numbers.at(key).get<double>() == logged.at(key).get<double>());
  }
}

// The two forms of `minidet eval` are one evaluator: the --results form scores the results file the
// --checkpoint form wrote to the very numbers the --checkpoint form printed (both --json lines, to the last
// bit), and prints what scripts read: pycocotools' summary, the VOC table, and the pictures it drew.
TEST_CASE("values/minidet: eval --results scores a checkpoint's results file to the numbers eval --checkpoint gave") {
  const fs::path folder = fresh_folder("eval_results");
  write_text(folder / "tiny.json", kTinyConfig);
  const Result trained = run_minidet(folder, "train --config tiny.json --device cpu --threads 1 --out run "
                                             "--set schedule.eval_every=0");
  REQUIRE_MESSAGE(trained.code == 0, trained.err);
  // The run's held-out split (64 px, 4 images, seed 0) as COCO files: the ground truth the --results form reads.
  REQUIRE(export_shapes(folder, "--size 64 --train 6 --test 4 --seed 0 --out shapes"));

  const Result from_checkpoint = run_minidet(folder, "eval --checkpoint run --device cpu --out results.json --json");
  REQUIRE_MESSAGE(from_checkpoint.code == 0, from_checkpoint.err);
  CHECK(json::parse(read_text(folder / "results.json")).is_array());
  const Result from_file = run_minidet(folder, "eval --gt shapes/test.json --results results.json --voc --per-category "
                                               "--json --draw drawn --draw-count 2");
  REQUIRE_MESSAGE(from_file.code == 0, from_file.err);
  CHECK(from_file.err.empty());
  CHECK(from_file.out.find("4 images, ") == 0);
  CHECK(from_file.out.find(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = ") !=
        std::string::npos);
  CHECK(from_file.out.find("VOC AP@0.50 (all-point)") != std::string::npos);         // --voc
  CHECK(from_file.out.find("  category    1 square ") != std::string::npos);  // --per-category

  const json expected = last_json_line(from_checkpoint.out), got = last_json_line(from_file.out);
  for (const char* key : {"map50", "coco_ap", "coco_ap50", "coco_ap75", "coco_ar100"}) {
    CAPTURE(key);
    REQUIRE(expected.at(key).is_number());
    CHECK(got.at(key).get<double>() == expected.at(key).get<double>());
  }
  // The checkpoint form's own printed mAP@0.5 is its JSON line's, rounded.
  char printed[64];
  std::snprintf(printed, sizeof printed, "mAP@0.5 %.4f", expected.at("map50").get<double>());
  CHECK(from_checkpoint.out.find(printed) != std::string::npos);

  // --draw: the first 2 images, with the test split's file names, each a readable PNG and named on stdout.
  int64_t pictures = 0;
  for (const auto& entry : fs::directory_iterator(folder / "drawn")) {
    CHECK(!data::read_png(entry.path().string()).empty());
    CHECK(from_file.out.find("drew drawn/" + entry.path().filename().string()) != std::string::npos);
    ++pictures;
  }
  CHECK(pictures == 2);
}

#ifdef MINIDET_MPIEXEC
// Data parallel: 2 ranks write one run folder (rank 0 only: one line per step in metrics.jsonl, one progress
// output), evaluate sharded, and a 2-rank run stopped early resumes with 1 rank (the checkpoint does not
// depend on the number of ranks). A bad global batch stops both ranks with one reason.
TEST_CASE("values/minidet: mpirun -np 2 minidet train writes one run folder and resumes with 1 rank") {
  const fs::path folder = fresh_folder("mpirun");
  write_text(folder / "tiny.json", kTinyConfig);
  const std::string mpirun = std::string(MINIDET_MPIEXEC) + " ";
  const Result two = run_minidet(folder, "train --config tiny.json --device cpu --threads 1 --out two", mpirun);
  REQUIRE_MESSAGE(two.code == 0, two.err);
  CHECK(two.out.find("data parallel: 2 ranks on 1 machine, 1 images per rank per step") != std::string::npos);
  CHECK(two.out.find("  rank 0: local 0 of 2 on ") != std::string::npos);
  CHECK(two.out.find("  rank 1: local 1 of 2 on ") != std::string::npos);
  CHECK(two.out.find("note: BatchNorm normalises over the 1 image of each step on each rank alone") != std::string::npos);
  CHECK(two.out.find("trained 6 steps") == two.out.rfind("trained 6 steps"));  // printed by rank 0 alone
  check_run_folder(folder / "two");
  check_batch_plan(folder / "two");  // the global batches, as one process lists them
  CHECK(loss_lines(folder / "two" / "metrics.jsonl").size() == 6);

  const Result first = run_minidet(folder, "train --config tiny.json --device cpu --threads 1 --out split --stop-after 4",
                                   mpirun);
  REQUIRE_MESSAGE(first.code == 0, first.err);
  const Result second = run_minidet(folder, "train --resume split --device cpu --threads 1");
  REQUIRE_MESSAGE(second.code == 0, second.err);
  CHECK(second.out.find("resuming, steps 5..6") != std::string::npos);
  check_run_folder(folder / "split");
  check_batch_plan(folder / "split");  // 4 steps gathered from 2 ranks, then 2 written by one

  const Result odd = run_minidet(folder, "train --config tiny.json --device cpu --out odd --set schedule.batch=3", mpirun);
  CHECK(odd.code != 0);
  // Both ranks fail alike and the first MPI_Abort may kill the other before it prints: either rank may speak.
  CHECK(odd.err.find(" of 2 (local ") != std::string::npos);
  CHECK(odd.err.find("schedule.batch 3 is the global batch: it must be a multiple of the 2 ranks") != std::string::npos);
}

#ifdef MINIDET_LOCAL_HOSTS_AGENT
// Several machines, played by this one (scripts/local-hosts-agent.sh starts each host's Open MPI daemon here):
// each rank is local rank 0 of 1 on its host, rank 0 alone writes the shared run folder, and a run stopped on
// two hosts resumes on two hosts.
TEST_CASE("values/minidet: mpirun -H a:1,b:1 (two hosts played by this machine) trains, writes and resumes") {
  const fs::path folder = fresh_folder("mpirun-hosts");
  write_text(folder / "tiny.json", kTinyConfig);
  // Open MPI over the loopback only: a sandbox's own network address may not answer itself. A launch that
  // hangs fails within 2 minutes instead of holding the suite until CTest's timeout.
  const std::string mpirun = "timeout 120 " + std::string(MINIDET_MPIEXEC) + " -H minidet-host-a:1,minidet-host-b:1 --mca plm rsh " +
                             "--mca plm_rsh_agent " + MINIDET_LOCAL_HOSTS_AGENT + " --mca plm_rsh_no_tree_spawn 1 " +
                             "--mca btl self,tcp --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo ";
  const Result first = run_minidet(folder, "train --config tiny.json --device cpu --threads 1 --out hosts --stop-after 4",
                                   mpirun);
  REQUIRE_MESSAGE(first.code == 0, first.err);
  CHECK(first.out.find("data parallel: 2 ranks on 2 machines, 1 images per rank per step") != std::string::npos);
  CHECK(first.out.find("  rank 0: local 0 of 1 on ") != std::string::npos);
  CHECK(first.out.find("  rank 1: local 0 of 1 on ") != std::string::npos);
  const Result second = run_minidet(folder, "train --resume hosts --device cpu --threads 1", mpirun);
  REQUIRE_MESSAGE(second.code == 0, second.err);
  CHECK(second.out.find("resuming, steps 5..6") != std::string::npos);
  CHECK(second.out.find("trained 6 steps") == second.out.rfind("trained 6 steps"));  // rank 0 alone
  check_run_folder(folder / "hosts");
  check_batch_plan(folder / "hosts");
  CHECK(loss_lines(folder / "hosts" / "metrics.jsonl").size() == 6);
}
#endif

// A Ctrl-C reaches one rank only (mpirun does not forward it; see the README): the ranks agree on stopping at
// the next logged step, through an all-reduce of the flag there, and rank 0 saves that step.
TEST_CASE("values/minidet: under mpirun, SIGINT to one rank stops every rank at the same logged step") {
  const fs::path folder = fresh_folder("mpirun-interrupt");
  write_text(folder / "tiny.json", kTinyConfig);
  const std::string arguments = "train --config tiny.json --device cpu --threads 1 --out ranks-run";
  const pid_t launcher = spawn_minidet(folder, arguments + " --set schedule.steps=100000 --set schedule.eval_every=0 " +
                                                   "--set schedule.log_every=3",
                                       MINIDET_MPIEXEC);
  REQUIRE(launcher > 0);
  wait_until_written(folder / "ranks-run" / "metrics.jsonl");
  // The ranks are the processes whose command line starts with the program (mpirun's starts with mpirun).
  const std::string find = "pgrep -f '^" + std::string(MINIDET_EXE) + " " + arguments + "'";
  std::string pids;
  if (FILE* pipe = popen(find.c_str(), "r")) {
    char buffer[256];
    while (fgets(buffer, sizeof buffer, pipe)) pids += buffer;
    pclose(pipe);
  }
  const pid_t rank = static_cast<pid_t>(std::atol(pids.c_str()));  // the first one listed
  REQUIRE_MESSAGE(rank > 0, "no rank process found by: " << find);
  kill(rank, SIGINT);
  const Result r = wait_minidet(launcher, folder);
  CHECK(r.code == 130);
  const std::string& out = r.out;
  const int64_t step =
      nn::load_checkpoint((folder / "ranks-run" / "last.ckpt").string()).get("progress.step").item<int64_t>();
  CHECK(step % 3 == 0);  // a logged step (the first, step 1, was over before the signal)
  CHECK(out.find("interrupted after step " + std::to_string(step) + ";") != std::string::npos);
  CHECK(out.find("interrupted after step") == out.rfind("interrupted after step"));  // rank 0 alone prints
  CHECK(out.find('\r') == std::string::npos);  // plain lines: mpirun's pseudo-terminal is not the user's
}
#endif

TEST_CASE("values/minidet: Ctrl-C finishes the step, saves last.ckpt, says how to resume and exits 130") {
  const fs::path folder = fresh_folder("interrupt");
  write_text(folder / "tiny.json", kTinyConfig);
  // A run far too long to finish; SIGINT once its first step is logged (spawn_minidet's pid is minidet's own).
  const pid_t pid = spawn_minidet(folder, "train --config tiny.json --device cpu --out run --set schedule.steps=100000 "
                                          "--set schedule.eval_every=0");
  REQUIRE(pid > 0);
  wait_until_written(folder / "run" / "metrics.jsonl");
  kill(pid, SIGINT);
  const Result r = wait_minidet(pid, folder);
  CHECK(r.code == 130);
  const std::string& out = r.out;
  CHECK(out.find("interrupted after step") != std::string::npos);
  CHECK(out.find("resume with: minidet train --resume run") != std::string::npos);
  const int64_t step = nn::load_checkpoint((folder / "run" / "last.ckpt").string()).get("progress.step").item<int64_t>();
  CHECK(step >= 1);
  CHECK(out.find("interrupted after step " + std::to_string(step) + ";") != std::string::npos);
}

TEST_CASE("values/minidet: explain records one step of a fresh or trained detector and makes its page") {
  const fs::path folder = fresh_folder("explain");
  write_text(folder / "tiny.json", kTinyConfig);
  // A fresh detector of the tiny config, held-out image 1: the record names the losses and the parameters.
  const Result fresh = run_minidet(folder, "explain --config tiny.json --device cpu --threads 1 --image-index 1 "
                                           "--record fresh.json");
  REQUIRE_MESSAGE(fresh.code == 0, fresh.err);
  const json record = json::parse(read_text(folder / "fresh.json"));
  CHECK(record["format"] == "minidet-backward-record");
  REQUIRE(record["nodes"].size() > 20);
  CHECK(record["nodes"][0]["output_names"][0] == "total loss");
  bool named_loss = false, backbone_leaf = false;
  for (const json& node : record["nodes"]) {
    for (const json& name : node["output_names"]) named_loss = named_loss || name == "loss_box_reg";
    backbone_leaf = backbone_leaf || (node["op"] == "AccumulateGrad" &&
                                      node["leaf"].get<std::string>().rfind("backbone.", 0) == 0);
  }
  CHECK(named_loss);
  CHECK(backbone_leaf);

  // A trained checkpoint's step, and the page: written directly, or later from the record.
  REQUIRE(run_minidet(folder, "train --config tiny.json --device cpu --threads 1 --out run").code == 0);
  const Result trained = run_minidet(folder, "explain --checkpoint run --device cpu --threads 1 --record run.json");
  REQUIRE_MESSAGE(trained.code == 0, trained.err);
  CHECK(json::parse(read_text(folder / "run.json"))["nodes"].size() == record["nodes"].size());
  const Result page = run_minidet(folder, "explain --from-record run.json --out run.html");
  if (page.code != 0 && page.err.find("Graphviz") != std::string::npos) {
    MESSAGE("this build has no Graphviz: the page is not written, and the error says so");
  } else {
    REQUIRE_MESSAGE(page.code == 0, page.err);
    const std::string html = read_text(folder / "run.html");
    CHECK(html.find("minidet-backward-record") != std::string::npos);
    CHECK(html.find("<svg") != std::string::npos);
  }

  // Bad requests end in one line.
  const Result nothing = run_minidet(folder, "explain --config tiny.json --device cpu");
  CHECK(nothing.code == 1);
  CHECK(nothing.err.find("give --out PAGE.html, --record RECORD.json or both") != std::string::npos);
  const Result far = run_minidet(folder, "explain --config tiny.json --device cpu --image-index 4 --record x.json");
  CHECK(far.code == 1);
  CHECK(far.err.find("--image-index 4 is not an image of the held-out split, which has 4") != std::string::npos);
}
