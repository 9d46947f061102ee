// One row of a bad-input table: a call that must throw minidet::Error whose message contains `fragment`
// (for the op tables, the op's name), and a few words saying what is wrong with it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tests/support.h"

namespace minidet::test {

struct BadCall {
  std::string fragment;
  std::string what;
  std::function<void()> call;
};

inline void check_bad_calls(const std::vector<BadCall>& rows) {
  for (const BadCall& row : rows) {
    CAPTURE(row.fragment);
    CAPTURE(row.what);
    CHECK_THROWS_CONTAINING(row.call(), row.fragment);
  }
}

}  // namespace minidet::test
