// minidet::Error and the one check macro every layer uses.
//
//   MINIDET_CHECK(rois.dim() == 2, "roi_align: expected rois of shape (K, 5), got ", rois.sizes());
//
// The message parts are streamed together only when the check fails, so a passing check costs one branch.
// The thrown Error carries the message plus the file and line of the check.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace minidet {

class Error : public std::runtime_error {
 public:
  Error(const std::string& message, const char* file, int line);
  const std::string& message() const { return message_; }  // without the location suffix
  const char* file() const { return file_; }
  int line() const { return line_; }

 private:
  std::string message_;
  const char* file_;
  int line_;
};

namespace detail {

// Vectors (shapes, strides) print as (2, 3, 4) so messages can show them directly.
template <typename T>
void stream_part(std::ostringstream& out, const std::vector<T>& values) {
  out << '(';
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << (values.size() == 1 ? ",)" : ")");
}
template <typename T>
void stream_part(std::ostringstream& out, const T& value) {
  out << value;
}

template <typename... Parts>
std::string compose(const Parts&... parts) {
  std::ostringstream out;
  (stream_part(out, parts), ...);
  return out.str();
}

[[noreturn]] void throw_error(const std::string& message, const char* file, int line);

}  // namespace detail
}  // namespace minidet

#define MINIDET_CHECK(cond, ...)                                                                  \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      ::minidet::detail::throw_error(::minidet::detail::compose(__VA_ARGS__), __FILE__, __LINE__); \
    }                                                                                             \
  } while (0)

#define MINIDET_FAIL(...) \
  ::minidet::detail::throw_error(::minidet::detail::compose(__VA_ARGS__), __FILE__, __LINE__)
