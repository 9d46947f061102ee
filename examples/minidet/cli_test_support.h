// Helpers shared by the minidet program tests (test_minidet_cli.cpp, test_minidet_crash.cpp): a tiny run
// config, running the built program (MINIDET_EXE) in a folder under MINIDET_CLI_TEST_DIR, and reading what
// it wrote. Header-only: each test program is one .cpp plus this file.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace minidet_cli_test {

namespace fs = std::filesystem;
using nlohmann::json;

// A run config small enough to train 6 steps in a second or two: 64 px, 6 training images (3 batches of
// 2 per epoch, so the 6 steps cross an epoch), a backbone a few channels wide.
inline const char* kTinyConfig = R"({
  "schedule": {"steps": 6, "batch": 2, "eval_every": 3, "log_every": 1, "warmup": 1, "detection_images": 2},
  "data": {"image_size": 64, "train_images": 6, "test_images": 4},
  "detector": {
    "backbone": {"stem_channels": 8, "widths": [8, 16, 16], "blocks": [1, 1, 1], "strides": [2, 2, 1]},
    "rpn": {"batch_size_per_image": 32, "train": {"pre_nms_top_n": 100, "post_nms_top_n": 32},
            "test": {"pre_nms_top_n": 100, "post_nms_top_n": 32}},
    "roi_heads": {"representation_size": 16, "batch_size_per_image": 32}}
})";

struct Result {
  int code = -1;
  std::string out, err;
};

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// A fresh folder per test case, under the build tree.
inline fs::path fresh_folder(const std::string& name) {
  const fs::path folder = fs::path(MINIDET_CLI_TEST_DIR) / name;
  fs::remove_all(folder);
  fs::create_directories(folder);
  return folder;
}

// Runs `minidet <arguments>` in `folder` with stdout and stderr captured; --threads is pinned by the
// callers that compare losses, since the CPU kernels' summation order may follow the thread count.
// `launcher` goes before the program (e.g. "mpirun -np 2 ").
inline Result run_minidet(const fs::path& folder, const std::string& arguments, const std::string& launcher = "") {
  const std::string command = "cd '" + folder.string() + "' && " + launcher + "'" + MINIDET_EXE + "' " + arguments +
                              " > stdout.txt 2> stderr.txt";
  const int status = std::system(command.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(folder / "stdout.txt");
  r.err = read_text(folder / "stderr.txt");
  return r;
}

inline std::vector<json> read_jsonl(const fs::path& path) {
  std::vector<json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line));  // throws (fails the test) on bad JSON
  return lines;
}

// The train lines without their timings, which differ from run to run.
inline std::vector<json> loss_lines(const fs::path& metrics) {
  std::vector<json> out;
  for (json line : read_jsonl(metrics)) {
    if (line.at("type") != "train") continue;
    line.erase("images_per_s");
    line.erase("elapsed_s");
    out.push_back(line);
  }
  return out;
}

}  // namespace minidet_cli_test
