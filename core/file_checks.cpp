#include "core/file_checks.h"

#include <filesystem>

#include "core/error.h"

namespace minidet {

void check_not_a_directory(const std::string& what, const std::string& path) {
  std::error_code ec;  // a path we may not even stat is left to the reader's own open check
  const bool exists = std::filesystem::exists(path, ec);
  MINIDET_CHECK(!exists || std::filesystem::is_regular_file(path, ec), what, ": ", path, " is not a file");
}

}  // namespace minidet
