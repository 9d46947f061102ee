#!/bin/sh
# The driver of the browser tests (tests/browser/CMakeLists.txt): checks that a page can be made and played
# here, makes it, then plays it in headless chromium (test_explorer.py).
#
#   run_explorer_test.sh FIXTURE PYTHON SCRIPT PAGE RECORD SCREENSHOT PROGRAM [ARGS...]
#
# FIXTURE is write_explorer_fixture (asked with --available whether this build has Graphviz), PYTHON the
# interpreter that imports selenium ("" when CMake found none), SCRIPT test_explorer.py. PROGRAM [ARGS...]
# writes PAGE and RECORD. Exit 77 (CTest: Skipped, visibly) when Graphviz, Python, selenium, chromium or
# chromedriver is missing, before the program runs; otherwise the exit status of the first step that fails.
set -u
fixture=$1 python=$2 script=$3 page=$4 record=$5 screenshot=$6
shift 6

"$fixture" --available || exit $?
if [ -z "$python" ]; then
  echo "SKIPPED: no Python 3 interpreter was found when CMake configured (install python3-selenium, re-run cmake)"
  exit 77
fi
"$python" -B "$script" --check-only || exit $?

mkdir -p "$(dirname "$page")" "$(dirname "$record")"
rm -f "$page" "$record"
echo "run_explorer_test: $*"
"$@"
status=$?
if [ $status -ne 0 ]; then
  echo "run_explorer_test: the program that writes the page failed (exit status $status)"
  [ $status -eq 77 ] && exit 1  # a skip is decided above, not by the program
  exit $status
fi
for file in "$page" "$record"; do
  [ -s "$file" ] || { echo "run_explorer_test: $file was not written"; exit 1; }
done
exec "$python" -B "$script" "$page" "$record" "$screenshot"
