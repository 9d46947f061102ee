// Fuzzing every reader of outside data (tests/errors/fuzz.h): checkpoints, COCO instances and results
// files, PNG, JPEG and the detector config. Each reader gets a few hundred mutants of a valid input in CI
// (scripts/fuzz.sh runs many more) and must refuse each cleanly with minidet::Error or accept it with a
// result that holds together. Then every file of the regression corpus (tests/errors/corpus/<reader>/) is
// read once more.
#include <cmath>
#include <string>
#include <vector>

#include "core/factories.h"
#include "data/coco/coco_format.h"
#include "data/image/image_io.h"
#include "data/shapes/shapes_dataset.h"
#include "models/faster_rcnn/detector_config.h"
#include "nn/checkpoint/checkpoint.h"
#include "tests/data/temp_dir.h"
#include "tests/errors/fuzz.h"
#include "tests/support.h"

using namespace minidet;

namespace {

// Runs the fuzzer and the corpus on one reader and reports both.
void check_reader(const std::string& name, const std::string& seed_input, bool text, uint64_t seed,
                  const std::function<void(const std::string&)>& read, const test::FixUp& fix = {}) {
  const test::FuzzReport report = test::fuzz(name, seed_input, text, test::fuzz_iterations(300), seed, read, fix);
  std::string messages;
  for (const std::string& m : report.messages) messages += "\n  " + m;
  MESSAGE(name << ": " << report.accepted << " accepted, " << report.refused << " refused, "
               << report.failures.size() << " failed; distinct refusals:" << messages);
  for (const std::string& f : report.failures) FAIL_CHECK(name << ": " << f);
  CHECK(report.refused > 0);  // the mutations do break the input

  for (const std::string& path : test::corpus_files(name)) {
    CAPTURE(path);
    try {
      read(test::read_file(path));
    } catch (const Error&) {
      // refused cleanly: what the corpus file is there to keep true
    }
  }
}

// Half of the checkpoint mutants get a correct checksum again (FNV-1a 64 of every byte before the last 8,
// docs/checkpoint-format.md), so the structural checks behind the checksum are fuzzed too.
std::string fix_checksum(std::string bytes) {
  if (bytes.size() < 8 || bytes.size() % 2 == 0) return bytes;
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i + 8 < bytes.size(); ++i) hash = (hash ^ static_cast<uint8_t>(bytes[i])) * 1099511628211ull;
  for (int k = 0; k < 8; ++k) bytes[bytes.size() - 8 + k] = static_cast<char>((hash >> (8 * k)) & 0xff);
  return bytes;
}

void check_image(const data::Image& image) {
  CHECK(image.width > 0);
  CHECK(image.height > 0);
  CHECK(static_cast<int64_t>(image.pixels.size()) == image.width * image.height * 3);
}

}  // namespace

TEST_CASE("errors/fuzz_readers: checkpoints are refused cleanly or read whole") {
  test::TempDir dir;
  nn::Checkpoint checkpoint;
  checkpoint.put("weight", arange(24.0, kFloat32).reshape({2, 3, 4}));
  checkpoint.put("step", from_vector<int64_t>({7}, {}));
  checkpoint.put("empty", zeros({0, 5}, kFloat64));
  const std::string path = dir.file("seed.ckpt");
  nn::save_checkpoint(path, checkpoint);
  const std::string mutant = dir.file("mutant.ckpt");
  check_reader("checkpoint", test::read_file(path), false, 1, [&](const std::string& bytes) {
    test::write_file(mutant, bytes);
    const nn::Checkpoint c = nn::load_checkpoint(mutant);
    for (const auto& [name, t] : c.entries) CHECK(t.numel() >= 0);
  }, fix_checksum);
}

TEST_CASE("errors/fuzz_readers: COCO instances and results files") {
  test::TempDir dir;
  data::ShapesOptions shapes;
  shapes.image_width = shapes.image_height = 32;
  shapes.test_images = 3;
  const data::ShapesDataset dataset(data::Split::kTest, shapes);
  const std::string instances = dir.file("instances.json");
  data::write_coco_instances(data::coco_instances_from_dataset(dataset), instances);
  const std::string mutant = dir.file("mutant.json");
  check_reader("coco_instances", test::read_file(instances), true, 2, [&](const std::string& text) {
    test::write_file(mutant, text);
    const data::CocoInstances read = data::read_coco_instances(mutant);
    for (const auto& a : read.annotations) CHECK((std::isfinite(a.box.x1) && a.box.x2 >= a.box.x1));
  });

  const data::CocoInstances truth = data::read_coco_instances(instances);
  std::vector<data::Detection> detections = {{truth.images[0].id, truth.categories[0].id, {1, 2, 10, 12}, 0.9},
                                             {truth.images[1].id, truth.categories[1].id, {3, 3, 8, 9}, 0.4}};
  const std::string results = dir.file("results.json");
  data::write_coco_results(detections, results);
  check_reader("coco_results", test::read_file(results), true, 3, [&](const std::string& text) {
    test::write_file(mutant, text);
    for (const data::Detection& d : data::read_coco_results(mutant, &truth)) CHECK(std::isfinite(d.score));
  });
}

TEST_CASE("errors/fuzz_readers: PNG and JPEG images") {
  test::TempDir dir;
  data::Image image(13, 7);
  for (int64_t y = 0; y < 7; ++y)
    for (int64_t x = 0; x < 13; ++x) image.set(x, y, {static_cast<uint8_t>(x * 19), static_cast<uint8_t>(y * 31), 77});
  const std::string png = dir.file("seed.png"), jpeg = dir.file("seed.jpg"), mutant = dir.file("mutant");
  data::write_png(image, png);
  data::write_jpeg(image, jpeg);
  check_reader("png", test::read_file(png), false, 4, [&](const std::string& bytes) {
    test::write_file(mutant, bytes);
    check_image(data::read_image(mutant));
  });
  check_reader("jpeg", test::read_file(jpeg), false, 5, [&](const std::string& bytes) {
    test::write_file(mutant, bytes);
    check_image(data::read_image(mutant));
  });
}

TEST_CASE("errors/fuzz_readers: the detector config") {
  check_reader("detector_config", models::DetectorConfig().to_json(), true, 6, [](const std::string& text) {
    const models::DetectorConfig config = models::DetectorConfig::from_json(text);
    config.validate();  // an accepted config must also be a valid one, or refused by validate
  });
}
