#!/usr/bin/env bash
# Many kill -9 / --resume trials of `minidet train` (crash safety of the run folder): the CTest case
# "values/minidet: kill -9 at random moments..." (examples/minidet/test_minidet_crash.cpp) run with
# MINIDET_KILL_TRIALS trials instead of 6. Each trial kills a tiny CPU run at a random moment (every other
# trial kills its first resume too), checks that every *.ckpt present loads, resumes, and checks that the
# losses of all 6 steps equal an uninterrupted run's. About 0.5 s a trial on one core.
#   bash scripts/kill-resume.sh [TRIALS, default 100] [build dir, default build/release]
#   MINIDET_KILL_SEED=7 bash scripts/kill-resume.sh 500     # other kill times
# Prints one line per trial and the summary: trials, resumes OK, corrupt checkpoints found (must be 0).
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-100}
build=${2:-build/release}
cmake --build "$build" --target minidet test_minidet_crash -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
set +e
MINIDET_KILL_TRIALS=$trials "$build/examples/minidet/test_minidet_crash" -tc="*kill -9 at random moments*" -s 2>&1 |
  grep -E "kill-resume|ERROR|corrupt checkpoint|test cases" | sed 's/^.*MESSAGE: //'
rc=${PIPESTATUS[0]}
echo "kill-resume: $( ((rc == 0)) && echo PASSED || echo FAILED ) (test exit code $rc)"
exit "$rc"
