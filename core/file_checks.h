// A check shared by every reader of files (checkpoints, COCO json, configs).
//
// A directory opens fine as a std::ifstream and only fails on the first read, where libstdc++ throws
// std::ios_base::failure instead of setting a state bit, so a reader that only checks in.good() would let a
// foreign exception escape. Call this before opening: a missing path passes (the reader's own "cannot open"
// message is clearer), anything that exists and is not a regular file is refused as
// "<what>: <path> is not a file".
#pragma once

#include <string>

namespace minidet {

void check_not_a_directory(const std::string& what, const std::string& path);

}  // namespace minidet
