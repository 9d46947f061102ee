// A seeded mutational fuzzer for the readers of outside data (checkpoints, COCO json, PNG, JPEG, the
// detector config). It starts from a valid input, breaks it in the ways real files break or attackers
// break them, and asks the reader to read each result. The reader must either accept the input (and then
// what it returns must hold together) or refuse it with minidet::Error. Anything else fails the test: a
// different exception (std::bad_alloc from a size nobody checked, nlohmann's own exceptions leaking, a
// std::out_of_range), or, outside the test's control, a crash or a hang, which the sanitizer builds and
// CTest's timeout catch.
//
// Mutations, one or a few per input, drawn from a minidet::Generator (so a seed reproduces a run):
//   truncate        cut the input at a random length (a download that stopped)
//   flip            flip a few random bits (a bad disk, a bad cable)
//   inflate         overwrite 4 or 8 bytes with a huge little-endian count (0xffffffff, 2^31, 2^63, ...)
//   insert / erase  add random bytes or remove a random range
//   repeat          duplicate a random chunk
//   number          (text) replace a number with a huge, tiny, negative or non-integer one
//   nest            (text) wrap the input in thousands of '[' (deep nesting)
// MINIDET_FUZZ_ITERATIONS overrides the number of inputs per reader (scripts/fuzz.sh runs many more).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/generator.h"

namespace minidet::test {

std::string mutate(const std::string& input, Generator& gen, bool text);

// Iterations per reader: `fallback`, unless MINIDET_FUZZ_ITERATIONS is set.
int64_t fuzz_iterations(int64_t fallback);

struct FuzzReport {
  int64_t accepted = 0, refused = 0;
  std::vector<std::string> failures;  // "input N: what happened"; the input is saved next to the report
  std::vector<std::string> messages;  // distinct refusal messages' first words, to see the coverage
};

// Feeds `iterations` mutants of `seed_input` to `read` (which throws minidet::Error to refuse). Failing
// inputs are written to /tmp/minidet-fuzz-<name>-<N> so they can be added to tests/errors/corpus/.
// fix, when given, repairs each mutant before reading (e.g. recomputes a checksum so the reader's later
// checks get exercised too, not only the checksum).
using FixUp = std::function<std::string(std::string)>;
FuzzReport fuzz(const std::string& name, const std::string& seed_input, bool text, int64_t iterations,
                uint64_t seed, const std::function<void(const std::string&)>& read, const FixUp& fix = {});

// Every file of tests/errors/corpus/<reader>/ (a regression corpus of inputs fuzzing once found).
std::vector<std::string> corpus_files(const std::string& reader);
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace minidet::test
