// Writing files so that a crash, a full disk or a read-only folder never leaves a damaged file behind.
//
// write_file_atomically(path, bytes) writes "<path>.tmp" in the same folder, checks every write, fsyncs it,
// renames it over <path> and fsyncs the folder. rename() within one file system is atomic on POSIX, so at
// every moment <path> is the old complete file or the new complete file; the fsyncs make that hold after a
// power cut too (without the folder's fsync the rename itself may be lost). A temp file left by a process
// killed before its rename is never read; the next write replaces it.
//
// append_to_file(path, text) appends with O_APPEND (a line cut by a crash is the reader's to skip).
//
// Both fail with "<who>: cannot write <path>: <strerror(errno)>", e.g.
//   "save_checkpoint: cannot write runs/a/last.ckpt: File too large"
// (no "<who>: " when who is empty), and a failed atomic write removes its temp file, so <path> and its
// folder are as they were.
#pragma once

#include <functional>
#include <string>

namespace minidet {

// `before_rename` (may be empty) runs once the temp file is complete and durable, just before the rename:
// a test hook, so a test can kill the process at that exact moment.
void write_file_atomically(const std::string& who, const std::string& path, const std::string& bytes,
                           const std::function<void()>& before_rename = {});

void append_to_file(const std::string& who, const std::string& path, const std::string& text);

}  // namespace minidet
