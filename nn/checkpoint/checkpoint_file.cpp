// Reading and writing the checkpoint file format (docs/checkpoint-format.md).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "core/factories.h"
#include "core/file_checks.h"
#include "core/file_write.h"
#include "nn/checkpoint/checkpoint.h"

namespace minidet::nn {
namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;
constexpr size_t kMaxDims = 12;

uint64_t fnv1a(const unsigned char* data, size_t n, uint64_t hash = kFnvOffset) {
  for (size_t i = 0; i < n; ++i) hash = (hash ^ data[i]) * kFnvPrime;
  return hash;
}

// Appends values in little-endian order (the only byte order minidet runs on: x86-64 and arm64).
template <typename T>
void put_value(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

uint8_t dtype_code(DType dtype) { return static_cast<uint8_t>(dtype); }

// A bounds-checked reader over the file's bytes.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  template <typename T>
  T value(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  const char* take(size_t n, const char* what) {
    need(n, what);
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  size_t position() const { return pos_; }

 private:
  void need(size_t n, const char* what) const {
    MINIDET_CHECK(n <= limit() - pos_, "checkpoint ", path_, ": truncated while reading ", what, " at byte ", pos_,
                  " (needs ", n, " bytes, ", limit() - pos_, " left)");
  }
  size_t limit() const { return bytes_.size() - sizeof(uint64_t); }  // the checksum is not entry data
  const std::string& bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

// Refuses a float entry holding NaN or Inf, pointing at the first one (row-major index) and counting them.
template <typename T>
void check_finite(const std::string& path, const std::string& name, const T* values, int64_t count) {
  int64_t first = -1, bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (std::isfinite(values[i])) continue;
    if (first < 0) first = i;
    ++bad;
  }
  if (bad == 0) return;
  const T value = values[first];
  const char* what = std::isnan(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
  MINIDET_FAIL("checkpoint ", path, ": entry '", name, "' holds ", what, " at index ", first, " (", bad, " of its ",
               count, " values are not finite)");
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint,
                     const std::function<void()>& before_rename) {
  std::string bytes(kCheckpointMagic, sizeof kCheckpointMagic);
  put_value<uint32_t>(bytes, kCheckpointVersion);
  put_value<uint32_t>(bytes, 0);  // reserved
  put_value<uint64_t>(bytes, checkpoint.entries.size());
  for (const auto& [name, tensor] : checkpoint.entries) {
    MINIDET_CHECK(tensor.dim() <= static_cast<int64_t>(kMaxDims), "save_checkpoint: '", name, "' has more than ",
                  kMaxDims, " dims");
    put_value<uint32_t>(bytes, static_cast<uint32_t>(name.size()));
    bytes += name;
    put_value<uint8_t>(bytes, dtype_code(tensor.dtype()));
    put_value<uint8_t>(bytes, static_cast<uint8_t>(tensor.dim()));
    for (int64_t s : tensor.sizes()) put_value<int64_t>(bytes, s);
    NoGradGuard reading;
    const Tensor host = tensor.to(Device::cpu()).contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(host.numel()) * element_size(host.dtype());
    put_value<uint64_t>(bytes, nbytes);
    bytes.append(static_cast<const char*>(host.raw_data()), nbytes);
  }
  put_value<uint64_t>(bytes, fnv1a(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));

  write_file_atomically("save_checkpoint", path, bytes, before_rename);
}

Checkpoint load_checkpoint(const std::string& path, NonFiniteValues non_finite) {
  check_not_a_directory("load_checkpoint", path);
  std::ifstream in(path, std::ios::binary);
  MINIDET_CHECK(in.good(), "load_checkpoint: cannot open ", path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t header = sizeof kCheckpointMagic + 4 + 4 + 8;
  MINIDET_CHECK(bytes.size() >= header + 8, "checkpoint ", path, ": truncated (", bytes.size(),
                " bytes is less than a header and a checksum)");
  MINIDET_CHECK(std::memcmp(bytes.data(), kCheckpointMagic, sizeof kCheckpointMagic) == 0, "checkpoint ", path,
                ": not a minidet checkpoint (bad magic number)");
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  const uint64_t actual = fnv1a(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size() - 8);

  MINIDET_CHECK(stored == actual, "checkpoint ", path, ": checksum mismatch (the file is corrupted or truncated)");
  Reader reader(bytes, path);
  reader.take(sizeof kCheckpointMagic, "the magic number");
  const uint32_t version = reader.value<uint32_t>("the format version");
  MINIDET_CHECK(version == kCheckpointVersion, "checkpoint ", path, ": format version ", version,
                " is not supported (this build reads version ", kCheckpointVersion, ")");
  reader.value<uint32_t>("the reserved field");
  const uint64_t count = reader.value<uint64_t>("the entry count");

  Checkpoint checkpoint;
  std::set<std::string> names;
  for (uint64_t e = 0; e < count; ++e) {
    const uint32_t name_length = reader.value<uint32_t>("an entry name length");
    const std::string name(reader.take(name_length, "an entry name"), name_length);
    MINIDET_CHECK(names.insert(name).second, "checkpoint ", path, ": entry '", name, "' appears twice");
    const uint8_t code = reader.value<uint8_t>("a dtype");
    MINIDET_CHECK(code <= static_cast<uint8_t>(kUInt8), "checkpoint ", path, ": entry '", name,
                  "' has unknown dtype code ", int(code));
    const uint8_t ndim = reader.value<uint8_t>("a dim count");
    MINIDET_CHECK(ndim <= kMaxDims, "checkpoint ", path, ": entry '", name, "' has ", int(ndim), " dims");
    Shape sizes(ndim);
    uint64_t numel = 1;
    bool overflow = false;
    for (auto& s : sizes) {
      s = reader.value<int64_t>("a size");
      MINIDET_CHECK(s >= 0, "checkpoint ", path, ": entry '", name, "' has negative size ", s);
      overflow = overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(s), &numel);
    }
    const DType dtype = static_cast<DType>(code);
    uint64_t needed = 0;
    overflow = overflow || __builtin_mul_overflow(numel, element_size(dtype), &needed);
    // A crafted file must not make us allocate what it does not contain: the shape's bytes must be there.
    MINIDET_CHECK(!overflow && needed <= bytes.size(), "checkpoint ", path, ": entry '", name, "' has shape ",
                  sizes, ", more data than the whole file holds");
    const uint64_t nbytes = reader.value<uint64_t>("a data length");
    MINIDET_CHECK(nbytes == needed, "checkpoint ", path, ": entry '", name, "' declares ", nbytes,
                  " data bytes but its shape needs ", needed);
    const char* data = reader.take(nbytes, "tensor data");
    Tensor t = empty(sizes, dtype);
    if (nbytes > 0) std::memcpy(t.raw_data(), data, nbytes);
    if (non_finite == NonFiniteValues::kRefuse && dtype == kFloat32)
      check_finite(path, name, t.data<float>(), t.numel());
    if (non_finite == NonFiniteValues::kRefuse && dtype == kFloat64)
      check_finite(path, name, t.data<double>(), t.numel());
    checkpoint.entries.emplace_back(name, t);
  }
  MINIDET_CHECK(reader.position() == bytes.size() - 8, "checkpoint ", path, ": ",
                bytes.size() - 8 - reader.position(), " unexpected bytes after the last entry");
  return checkpoint;
}

}  // namespace minidet::nn
