#include "tests/errors/fuzz.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"

namespace minidet::test {

namespace {

size_t pick(Generator& gen, size_t n) { return n == 0 ? 0 : static_cast<size_t>(gen.next_int(0, static_cast<int64_t>(n))); }

// Byte offsets where a number starts in a text input.
std::vector<size_t> number_starts(const std::string& s) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool digit = (s[i] >= '0' && s[i] <= '9') || s[i] == '-';
    const bool after_number = i > 0 && ((s[i - 1] >= '0' && s[i - 1] <= '9') || s[i - 1] == '.' || s[i - 1] == '-');
    if (digit && !after_number) starts.push_back(i);
  }
  return starts;
}

void mutate_once(std::string& s, Generator& gen, bool text) {
  static const uint64_t huge[] = {0xffffffffull, 0x80000000ull, 0x7fffffffull, 0xffffffffffffffffull,
                                  0x8000000000000000ull, 0x100000000ull, 1ull << 40};
  static const char* numbers[] = {"1e999", "-1e999", "18446744073709551616", "-9223372036854775809",
                                  "9223372036854775807", "0.5", "-1", "1e-320", "NaN", "4294967296", "0"};
  const int kinds = text ? 8 : 6;
  switch (gen.next_int(0, kinds)) {
    case 0:  // truncate
      s.resize(pick(gen, s.size()));
      break;
    case 1:  // flip bits
      for (int k = gen.next_int(1, 9); k > 0 && !s.empty(); --k) s[pick(gen, s.size())] ^= static_cast<char>(1 << gen.next_int(0, 8));
      break;
    case 2: {  // inflate a count
      const size_t width = gen.next_int(0, 2) ? 8 : 4;
      if (s.size() < width) break;
      const uint64_t value = huge[pick(gen, sizeof(huge) / sizeof(huge[0]))];
      std::memcpy(&s[pick(gen, s.size() - width + 1)], &value, width);
      break;
    }
    case 3: {  // insert random bytes
      std::string bytes(static_cast<size_t>(gen.next_int(1, 64)), '\0');
      for (char& c : bytes) c = static_cast<char>(gen.next_int(0, 256));
      s.insert(pick(gen, s.size() + 1), bytes);
      break;
    }
    case 4: {  // erase a range
      if (s.empty()) break;
      const size_t at = pick(gen, s.size());
      s.erase(at, static_cast<size_t>(gen.next_int(1, 64)));
      break;
    }
    case 5: {  // repeat a chunk
      if (s.empty()) break;
      const size_t at = pick(gen, s.size());
      const std::string chunk = s.substr(at, static_cast<size_t>(gen.next_int(1, 256)));
      for (int k = gen.next_int(1, 8); k > 0; --k) s.insert(at, chunk);
      break;
    }
    case 6: {  // a number becomes a hostile one
      const std::vector<size_t> starts = number_starts(s);
      if (starts.empty()) break;
      const size_t at = starts[pick(gen, starts.size())];
      size_t end = at + 1;
      while (end < s.size() && ((s[end] >= '0' && s[end] <= '9') || s[end] == '.' || s[end] == 'e' || s[end] == '-' || s[end] == '+')) ++end;
      s.replace(at, end - at, numbers[pick(gen, sizeof(numbers) / sizeof(numbers[0]))]);
      break;
    }
    default: {  // deep nesting
      const size_t depth = static_cast<size_t>(gen.next_int(1000, 100000));
      s = std::string(depth, '[') + s + std::string(gen.next_int(0, 2) ? depth : 0, ']');
      break;
    }
  }
}

}  // namespace

std::string mutate(const std::string& input, Generator& gen, bool text) {
  std::string s = input;
  for (int k = gen.next_int(1, 4); k > 0; --k) mutate_once(s, gen, text);
  return s;
}

int64_t fuzz_iterations(int64_t fallback) {
  const char* env = std::getenv("MINIDET_FUZZ_ITERATIONS");
  return env != nullptr && std::atoll(env) > 0 ? std::atoll(env) : fallback;
}

FuzzReport fuzz(const std::string& name, const std::string& seed_input, bool text, int64_t iterations,
                uint64_t seed, const std::function<void(const std::string&)>& read, const FixUp& fix) {
  FuzzReport report;
  Generator gen(seed);
  std::set<std::string> seen;
  for (int64_t i = 0; i < iterations; ++i) {
    std::string input = mutate(seed_input, gen, text);
    if (fix) input = fix(std::move(input));
    std::string failure;
    try {
      read(input);
      ++report.accepted;
    } catch (const Error& e) {
      ++report.refused;
      std::string first(e.what());
      first = first.substr(0, first.find_first_of(":(\n", first.find(':') + 1));
      if (seen.insert(first).second) report.messages.push_back(first);
    } catch (const std::exception& e) {
      failure = std::string("a non-minidet exception: ") + e.what();
    } catch (...) {
      failure = "an unknown exception";
    }
    if (!failure.empty()) {
      const std::string path = "/tmp/minidet-fuzz-" + name + "-" + std::to_string(i);
      write_file(path, input);
      report.failures.push_back("input " + std::to_string(i) + " (" + path + "): " + failure);
    }
  }
  return report;
}

std::vector<std::string> corpus_files(const std::string& reader) {
  std::vector<std::string> files;
  const std::filesystem::path dir = std::filesystem::path(MINIDET_TEST_SOURCE_DIR) / "errors" / "corpus" / reader;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace minidet::test
