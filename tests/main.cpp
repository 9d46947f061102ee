// The doctest entry point shared by every test executable.
//
// CUDA cases carry doctest's skip decorator on machines without a GPU. doctest leaves skipped cases out of
// --list-test-cases, which CTest uses to register cases, so a listing here includes them (--no-skip):
// CTest then registers every case and reports the CUDA ones as "Skipped" instead of hiding them.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstring>

int main(int argc, char** argv) {
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strstr(argv[i], "list-test-cases") != nullptr || std::strcmp(argv[i], "-ltc") == 0)
      context.setOption("no-skip", true);
  }
  return context.run();
}
