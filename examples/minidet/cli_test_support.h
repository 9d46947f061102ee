// Helpers shared by the minidet program tests (test_minidet_cli.cpp, test_minidet_crash.cpp): a tiny run
// config, running the built program (MINIDET_EXE) in a folder under MINIDET_CLI_TEST_DIR, and reading what
// it wrote. Header-only: each test program is one .cpp plus this file.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
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
inline void append_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

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

// Starts `[launcher] minidet <arguments>` in `folder` without waiting, stdout and stderr to stdout.txt and
// stderr.txt there (words split on spaces: no quoting). `in_child` runs in the child just before exec:
// resource limits, another user, the environment. No shell: the files are opened before `in_child` can drop
// privileges, and without a launcher the pid is minidet's own, so a signal sent to it reaches the program.
inline pid_t spawn_minidet(const fs::path& folder, const std::string& arguments, const std::string& launcher = "",
                           const std::function<void()>& in_child = {}) {
  std::vector<std::string> words;
  std::istringstream split_launcher(launcher);
  for (std::string word; split_launcher >> word;) words.push_back(word);
  words.push_back(MINIDET_EXE);
  std::istringstream split(arguments);
  for (std::string word; split >> word;) words.push_back(word);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  const int out = open((folder / "stdout.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = open((folder / "stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out < 0 || err < 0 || chdir(folder.c_str()) != 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
  if (in_child) in_child();
  execvp(argv[0], argv.data());
  _exit(127);
}

// Waits for a spawned run: the exit code, or minus the signal that ended it.
inline Result wait_minidet(pid_t pid, const fs::path& folder) {
  int status = 0;
  waitpid(pid, &status, 0);
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  r.out = read_text(folder / "stdout.txt");
  r.err = read_text(folder / "stderr.txt");
  return r;
}

// Waits (up to `seconds`) until a spawned run has written something to `path`, e.g. its first metrics line.
inline void wait_until_written(const fs::path& path, int seconds = 120) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (read_text(path).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
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
