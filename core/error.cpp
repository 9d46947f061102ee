#include "core/error.h"

namespace minidet {

namespace {
std::string with_location(const std::string& message, const char* file, int line) {
  return message + " (at " + file + ":" + std::to_string(line) + ")";
}
}  // namespace

Error::Error(const std::string& message, const char* file, int line)
    : std::runtime_error(with_location(message, file, line)), message_(message), file_(file), line_(line) {}

namespace detail {
void throw_error(const std::string& message, const char* file, int line) { throw Error(message, file, line); }
}  // namespace detail

}  // namespace minidet
