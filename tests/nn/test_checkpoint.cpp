// Checkpoints: round trips, refusal of damaged files, atomic saves, and resuming training bit for bit.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>

#include "core/factories.h"
#include "nn/checkpoint/checkpoint.h"
#include "nn/optim/adam.h"
#include "nn/optim/lr_scheduler.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "tests/support.h"

using namespace minidet;
using namespace minidet::nn;

namespace {

// A tiny model with a parameter matrix, a bias and a buffer: y = tanh(x * w + b), count += 1.
class Tiny final : public Module {
 public:
  explicit Tiny(uint64_t seed) : Module("Tiny") {
    Generator g(seed);
    w = register_parameter("w", randn({3, 4}, kFloat64, &g));
    b = register_parameter("b", randn({4}, kFloat64, &g));
    count = register_buffer("count", zeros({1}, kFloat64));
  }
  Tensor forward(const Tensor& x) { return tanh(x * w + b); }
  Tensor w, b, count;
};

std::string temp_path(const std::string& name) {
  const std::string dir = "/tmp/minidet_test_checkpoint_" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0755);
  return dir + "/" + name;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// One training step of Tiny on a fixed batch; returns the loss.
double train_step(Tiny& model, Adam& opt, LRScheduler& sched, const Tensor& x, const Tensor& target) {
  opt.zero_grad();
  Tensor diff = model.forward(x) - target;
  Tensor loss = diff * diff;
  loss.backward(ones(loss.sizes(), kFloat64));
  opt.step();
  sched.step();
  NoGradGuard no_grad;
  model.count.copy_(model.count + 1.0);
  return (diff * diff).to_vector<double>()[0];
}

}  // namespace

TEST_CASE("values/checkpoint: every dtype and shape round-trips exactly") {
  Checkpoint c;
  c.put("f32", randn({2, 3}));
  c.put("f64", randn({4}, kFloat64));
  c.put("i64", from_vector<int64_t>({-5, 7, 1LL << 40}));
  c.put("bool", from_vector<bool>({true, false, true}));
  c.put("u8", from_vector<uint8_t>({0, 255}));
  c.put("scalar", scalar_tensor(3.5, kFloat64));
  c.put("empty", zeros({0, 5}));
  const std::string path = temp_path("roundtrip.ckpt");
  save_checkpoint(path, c);
  const Checkpoint back = load_checkpoint(path);
  REQUIRE(back.entries.size() == c.entries.size());
  for (size_t i = 0; i < c.entries.size(); ++i) {
    CAPTURE(c.entries[i].first);
    CHECK(back.entries[i].first == c.entries[i].first);
    CHECK(back.entries[i].second.dtype() == c.entries[i].second.dtype());
    CHECK(back.entries[i].second.sizes() == c.entries[i].second.sizes());
    CHECK(back.entries[i].second.to_vector<double>() == c.entries[i].second.to_vector<double>());
  }
}

TEST_CASE("errors/checkpoint: truncated corrupted and foreign files are refused") {
  Checkpoint c;
  c.put("w", randn({16}));
  const std::string path = temp_path("damaged.ckpt");
  save_checkpoint(path, c);
  const std::string good = read_bytes(path);

  write_bytes(path, good.substr(0, good.size() / 2));
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "checksum mismatch");
  write_bytes(path, good.substr(0, 10));
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "truncated");
  std::string flipped = good;
  flipped[40] ^= 0x01;  // one bit inside the tensor data
  write_bytes(path, flipped);
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "checksum mismatch");
  std::string foreign = good;
  foreign[0] = 'X';
  write_bytes(path, foreign);
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "bad magic");
  CHECK_THROWS_CONTAINING(load_checkpoint(temp_path("does_not_exist.ckpt")), "cannot open");
}

TEST_CASE("errors/checkpoint: a failed save leaves the previous file intact") {
  Checkpoint old_c;
  old_c.put("w", from_vector<float>({1, 2, 3}));
  const std::string path = temp_path("atomic.ckpt");
  save_checkpoint(path, old_c);
  const std::string before = read_bytes(path);
  // A directory where the temporary file must go makes the save fail before <path> is touched.
  ::mkdir((path + ".tmp").c_str(), 0755);
  Checkpoint new_c;
  new_c.put("w", from_vector<float>({9, 9, 9}));
  CHECK_THROWS_CONTAINING(save_checkpoint(path, new_c), "save_checkpoint: cannot write " + path + ": Is a directory");
  ::rmdir((path + ".tmp").c_str());
  CHECK(read_bytes(path) == before);
  CHECK(load_checkpoint(path).get("w").to_vector<float>() == std::vector<float>{1, 2, 3});
}

TEST_CASE("values/checkpoint: save then load resumes training bit for bit") {
  const Tensor x = randn({5, 3, 4}, kFloat64), target = rand({5, 3, 4}, kFloat64);
  auto make = [](Tiny& m) { return std::make_unique<Adam>(std::vector<ParamGroup>{{m.parameters(), 0.05, 0.0}}); };

  // Run A: 3 steps, checkpoint, 3 more steps.
  Tiny a(1);
  auto opt_a = make(a);
  WarmupCosineLR sched_a(*opt_a, 10, 0.1, 2);
  Generator gen_a(77);
  for (int i = 0; i < 3; ++i) train_step(a, *opt_a, sched_a, x, target);
  gen_a.next_u64();
  const std::string path = temp_path("resume.ckpt");
  save_checkpoint(path, capture_training_state(a, opt_a.get(), &sched_a, &gen_a, {3, 1}));
  std::vector<double> losses_a;
  for (int i = 0; i < 3; ++i) losses_a.push_back(train_step(a, *opt_a, sched_a, x, target));

  // Run B: a differently initialised model resumes from the checkpoint and must follow A exactly.
  Tiny b(2);
  auto opt_b = make(b);
  WarmupCosineLR sched_b(*opt_b, 10, 0.1, 2);
  Generator gen_b(5);
  const TrainingProgress progress = restore_training_state(load_checkpoint(path), b, opt_b.get(), &sched_b, &gen_b);
  CHECK(progress.step == 3);
  CHECK(progress.epoch == 1);
  CHECK(gen_b.next_u64() == gen_a.next_u64());
  std::vector<double> losses_b;
  for (int i = 0; i < 3; ++i) losses_b.push_back(train_step(b, *opt_b, sched_b, x, target));
  CHECK(losses_b == losses_a);  // exact equality: bit for bit
  CHECK(b.w.to_vector<double>() == a.w.to_vector<double>());
  CHECK(b.count.to_vector<double>() == a.count.to_vector<double>());
  CHECK(sched_b.lr() == sched_a.lr());
}

TEST_CASE("errors/checkpoint: a mismatched checkpoint is refused and changes nothing") {
  Tiny a(1);
  const std::string path = temp_path("mismatch.ckpt");
  Checkpoint c = capture_training_state(a, nullptr, nullptr, nullptr, {});
  // Same names, one wrong shape.
  Checkpoint wrong_shape;
  for (const auto& [name, t] : c.entries) wrong_shape.put(name, name == "model.b" ? zeros({5}, kFloat64) : t);
  save_checkpoint(path, wrong_shape);
  Tiny b(2);
  const std::vector<double> w_before = b.w.to_vector<double>();
  CHECK_THROWS_CONTAINING(restore_training_state(load_checkpoint(path), b, nullptr, nullptr, nullptr), "model.b");
  CHECK(b.w.to_vector<double>() == w_before);  // model.w came first and was valid, yet it was not written
  // A missing entry and an extra one.
  Checkpoint missing;
  for (const auto& [name, t] : c.entries)
    if (name != "model.count") missing.put(name, t);
  CHECK_THROWS_CONTAINING(restore_training_state(missing, b, nullptr, nullptr, nullptr), "model.count");
  Checkpoint extra = c;
  extra.put("model.ghost", zeros({1}));
  CHECK_THROWS_CONTAINING(restore_training_state(extra, b, nullptr, nullptr, nullptr), "matches nothing");
  CHECK(b.w.to_vector<double>() == w_before);
}

namespace {
// Builds a checkpoint file by hand with a correct checksum, so the parser's own checks (not the checksum)
// must catch what is wrong inside.
struct FileBuilder {
  std::string bytes = std::string(kCheckpointMagic, 8);
  template <typename T>
  FileBuilder& put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  FileBuilder& header(uint64_t entries) { return put<uint32_t>(1).put<uint32_t>(0).put<uint64_t>(entries); }
  FileBuilder& entry(const std::string& name, uint8_t dtype, std::vector<int64_t> sizes, uint64_t nbytes,
                     size_t data_bytes) {
    put<uint32_t>(static_cast<uint32_t>(name.size()));
    bytes += name;
    put<uint8_t>(dtype).put<uint8_t>(static_cast<uint8_t>(sizes.size()));
    for (int64_t s : sizes) put<int64_t>(s);
    put<uint64_t>(nbytes);
    bytes.append(data_bytes, '\0');
    return *this;
  }
  void write(const std::string& path, const std::string& trailing = "") {
    std::string all = bytes + trailing;
    uint64_t hash = 14695981039346656037ull;
    for (unsigned char c : all) hash = (hash ^ c) * 1099511628211ull;
    all.append(reinterpret_cast<const char*>(&hash), 8);
    write_bytes(path, all);
  }
};
}  // namespace

TEST_CASE("errors/checkpoint: crafted entries with a valid checksum are refused") {
  const std::string path = temp_path("crafted.ckpt");
  // float64 (2^31, 2^30): 2^61 elements, 2^64 bytes, which wraps to 0 in 64 bits.
  FileBuilder().header(1).entry("huge", 1, {int64_t(1) << 31, int64_t(1) << 30}, 0, 0).write(path);
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "huge");
  FileBuilder().header(1).entry("w", 0, {4}, 12, 12).write(path);  // 4 float32 need 16 bytes
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "declares 12 data bytes");
  FileBuilder().header(1).entry("w", 9, {1}, 1, 1).write(path);
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "unknown dtype code");
  FileBuilder().header(2).entry("w", 0, {1}, 4, 4).entry("w", 0, {1}, 4, 4).write(path);
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "appears twice");
  FileBuilder().header(1).entry("w", 0, {1}, 4, 4).write(path, "xyz");
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "unexpected bytes");
  FileBuilder().header(3).entry("w", 0, {1}, 4, 4).write(path);  // promises 3 entries, holds 1
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "truncated");
}

TEST_CASE("errors/checkpoint: malformed scalar entries are refused before anything changes") {
  Tiny a(1), b(2);
  auto opt_a = std::make_unique<Adam>(std::vector<ParamGroup>{{a.parameters(), 0.05, 0.0}});
  auto opt_b = std::make_unique<Adam>(std::vector<ParamGroup>{{b.parameters(), 0.05, 0.0}});
  WarmupCosineLR sched_a(*opt_a, 10), sched_b(*opt_b, 10);
  Checkpoint good = capture_training_state(a, opt_a.get(), &sched_a, nullptr, {2, 0});
  const std::vector<double> w_before = b.w.to_vector<double>();
  const double lr_before = sched_b.lr();
  for (const std::string bad : {"sched.step", "progress.epoch", "optim.lr.0"}) {
    CAPTURE(bad);
    Checkpoint c;
    for (const auto& [name, t] : good.entries)
      c.put(name, name != bad ? t : (bad == "sched.step" ? from_vector<int64_t>({-3}) : zeros({2}, kFloat64)));
    CHECK_THROWS(restore_training_state(c, b, opt_b.get(), &sched_b, nullptr));
    CHECK(b.w.to_vector<double>() == w_before);
    CHECK(sched_b.lr() == lr_before);
    CHECK(opt_b->state().empty());
  }
}

TEST_CASE("errors/checkpoint: a float entry holding NaN or Inf is refused on load, naming it and the index") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::string path = temp_path("non_finite.ckpt");
  Checkpoint c;
  c.put("progress.step", from_vector<int64_t>({3}));
  c.put("model.w", from_vector<float>({1, 2, static_cast<float>(nan), 4, static_cast<float>(nan)}));
  save_checkpoint(path, c);
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "checkpoint " + path +
                                                     ": entry 'model.w' holds NaN at index 2 (2 of its 5 values are "
                                                     "not finite)");
  Checkpoint moments;
  moments.put("optim.group0.param0.exp_avg_sq", from_vector<double>({0.5, -inf, inf}, {3, 1}));
  save_checkpoint(path, moments);
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "entry 'optim.group0.param0.exp_avg_sq' holds -Inf at index 1");
  Checkpoint rate;
  rate.put("optim.lr.0", from_vector<double>({inf}));
  save_checkpoint(path, rate);
  CHECK_THROWS_CONTAINING(load_checkpoint(path), "entry 'optim.lr.0' holds +Inf at index 0 (1 of its 1 values");
  // A tool that looks into a diverged run on purpose can still read it.
  save_checkpoint(path, c);
  const std::vector<float> values = load_checkpoint(path, NonFiniteValues::kAllow).get("model.w").to_vector<float>();
  CHECK(std::isnan(values[2]));
  CHECK(values[3] == 4);
}

TEST_CASE("errors/checkpoint: a non-finite learning rate or a negative counter is refused on restore, by name") {
  Tiny a(1), b(2);
  auto opt_a = std::make_unique<Adam>(std::vector<ParamGroup>{{a.parameters(), 0.05, 0.0}});
  auto opt_b = std::make_unique<Adam>(std::vector<ParamGroup>{{b.parameters(), 0.05, 0.0}});
  WarmupCosineLR sched_a(*opt_a, 10), sched_b(*opt_b, 10);
  const Checkpoint good = capture_training_state(a, opt_a.get(), &sched_a, nullptr, {2, 0});
  const std::vector<double> w_before = b.w.to_vector<double>();
  const double lr_before = opt_b->param_groups()[0].lr;
  // In memory, as a caller may build it: load_checkpoint's own check on the file does not apply.
  const struct {
    const char* entry;
    Tensor value;
    const char* message;
  } cases[] = {
      {"optim.lr.0", from_vector<double>({std::numeric_limits<double>::quiet_NaN()}),
       "checkpoint: optim.lr.0 is not a finite learning rate >= 0 (nan)"},
      {"optim.lr.0", from_vector<double>({-0.5}), "checkpoint: optim.lr.0 is not a finite learning rate >= 0 (-0.5)"},
      {"optim.initial_lr.0", from_vector<double>({std::numeric_limits<double>::infinity()}),
       "checkpoint: optim.initial_lr.0 is not finite (inf)"},
      {"progress.step", from_vector<int64_t>({-1}), "checkpoint: progress.step is negative (-1)"},
      {"progress.epoch", from_vector<int64_t>({-2}), "checkpoint: progress.epoch is negative (-2)"},
      {"progress.step", from_vector<double>({2.0}), "checkpoint: 'progress.step' must be one int64"},
  };
  for (const auto& bad : cases) {
    CAPTURE(bad.entry);
    Checkpoint c;
    for (const auto& [name, t] : good.entries) c.put(name, name == bad.entry ? bad.value : t);
    CHECK_THROWS_CONTAINING(restore_training_state(c, b, opt_b.get(), &sched_b, nullptr), bad.message);
    CHECK(b.w.to_vector<double>() == w_before);
    CHECK(opt_b->param_groups()[0].lr == lr_before);
    CHECK(opt_b->state().empty());
  }
  // A run that has not taken a step yet: initial_lr is -1 (no scheduler ran) and is restored as it is.
  Tiny fresh(3);
  Adam fresh_opt(std::vector<ParamGroup>{{fresh.parameters(), 0.05, 0.0}});
  const Checkpoint unscheduled = capture_training_state(fresh, &fresh_opt, nullptr, nullptr, {});
  CHECK_NOTHROW(restore_training_state(unscheduled, b, opt_b.get(), nullptr, nullptr));
  CHECK(opt_b->param_groups()[0].initial_lr == -1);
}
