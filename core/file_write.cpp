// See file_write.h. POSIX calls rather than std::ofstream: a stream's failure bit does not say why, and
// errno after a stream operation is not guaranteed; write(2) and fsync(2) report EFBIG, ENOSPC, EACCES.
#include "core/file_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace minidet {
namespace {

[[noreturn]] void fail(const std::string& who, const std::string& path, int error) {
  MINIDET_FAIL(who, who.empty() ? "" : ": ", "cannot write ", path, ": ", std::strerror(error));
}

// write(2) may write less than asked (a signal, a quota about to be reached); loop until all is written.
// Returns 0 or the errno of the failed write.
int write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace

void write_file_atomically(const std::string& who, const std::string& path, const std::string& bytes,
                           const std::function<void()>& before_rename) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(who, path, errno);
  int error = write_all(fd, bytes);
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  // close() can report a deferred write error (NFS), so its result counts too.
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    std::remove(tmp.c_str());
    fail(who, path, error);
  }
  if (before_rename) before_rename();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = errno;
    std::remove(tmp.c_str());
    fail(who, path, error);
  }
  // Make the rename itself durable. A folder that cannot be opened or synced (some file systems refuse)
  // leaves the file complete either way, so this is best effort.
  const int folder = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder >= 0) {
    (void)::fsync(folder);
    ::close(folder);
  }
}

void append_to_file(const std::string& who, const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) fail(who, path, errno);
  int error = write_all(fd, text);
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) fail(who, path, error);
}

}  // namespace minidet
