#!/usr/bin/env bash
# Part `killresume` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# scripts/kill-resume.sh: KILL_TRIALS (default 100) kill -9 / --resume trials of a tiny CPU
# minidet train; the summary's "corrupt checkpoints found" must be 0
note "== kill -9 / --resume trials of minidet train, ${KILL_TRIALS:=100} trials"
bash scripts/kill-resume.sh "$KILL_TRIALS" build/gpu >"$OUT/killresume.log" 2>&1
note "kill-resume exit code $?"
grep -E "summary|PASSED|FAILED|ERROR" "$OUT/killresume.log" | tee -a "$summary"
