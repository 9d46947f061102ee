#!/usr/bin/env bash
# Part `dist` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# Data parallel on every GPU of the machine (1, 2, 4 or 8), in the sub-parts DIST_PARTS names (default all):
#   cases              ctest -L dist: the dist cases under mpirun, cuda/dist_ddp and cuda/sync_batch_norm
#   throughput         minidet train (the default config) on 1, 2, 4... GPUs at DIST_BATCH images per GPU
#                      (default 8), then on 1 and all GPUs at DIST_BIG_BATCH per GPU (default 32): images/s
#                      and the ratio to 1 GPU
#   syncbn-throughput  all GPUs at DIST_BATCH images each, with BatchNorm and with SyncBatchNorm
#   accuracy           the same total batch (8): 1 GPU; all GPUs with SyncBatchNorm; all GPUs with each rank's
#                      own BatchNorm statistics; 1 GPU at one rank's share of the batch. DIST_SEEDS (default
#                      "0 1 2") each, evaluated every 50 steps: the mAP@0.5 curves
#   lr                 all GPUs at 8 images each (k times the default batch) at the default learning rate times
#                      1, sqrt(k) and k, for the images of the default run (750 / k steps) and for its steps
#                      (DIST_LR_SCHEDULES, default "images steps"; DIST_LR_SEEDS, default "0 1")
#   hosts              the GPUs split over two hosts played by this machine (scripts/local-hosts-agent.sh),
#                      with SyncBatchNorm: the placements, NCCL's transports, a run stopped at step 400 and
#                      resumed on both hosts
# Every run's log and metrics.jsonl come back under $OUT/dist/<label>/. DIST_REUSE=1 keeps the runs a warm
# machine already has in /tmp/dist (their tables are printed again, with the new ones).
gpus=$(nvidia-smi -L | wc -l)
parts=${DIST_PARTS:-cases,throughput,syncbn-throughput,accuracy,lr,hosts}
note "== data parallel on $gpus GPUs ($parts)"
minidet=build/gpu/examples/minidet/minidet
mpi=(mpirun --allow-run-as-root --bind-to none)
want() { [[ ,$parts, == *,$1,* ]]; }
# dist_run LABEL RANKS [minidet train arguments...]: one run into /tmp/dist/LABEL; 1 rank runs without mpirun
# (on the GPU in CUDA_VISIBLE_DEVICES, if set).
dist_run() {
  local label=$1 ranks=$2
  shift 2
  local launch=()
  if [[ -n ${DIST_REUSE:-} && -s /tmp/dist/$label/metrics.jsonl ]]; then  # a warm machine's earlier run
    note "$label: reused from an earlier call"
    return
  fi
  (( ranks > 1 )) && launch=("${mpi[@]}" -np "$ranks")
  rm -rf "/tmp/dist/$label"
  mkdir -p "$OUT/dist/$label"
  timeout "${DIST_RUN_TIMEOUT:-300}" "${launch[@]}" $minidet train --device cuda --out "/tmp/dist/$label" "$@" \
    >"$OUT/dist/$label/log.txt" 2>&1
  local code=$?
  cp "/tmp/dist/$label/metrics.jsonl" "$OUT/dist/$label/" 2>/dev/null
  note "$label: exit code $code, $(grep -o 'trained [0-9]* steps in [0-9:]*' "$OUT/dist/$label/log.txt")"
}
metrics() { echo "/tmp/dist/$1/metrics.jsonl"; }

if want cases; then
  ctest --preset gpu -L dist >"$OUT/dist-ctest.log" 2>&1
  note "dist ctest exit code $?"
  grep -E "tests passed|tests failed|Skipped|\*\*\*Failed|Timeout" "$OUT/dist-ctest.log" | tee -a "$summary"
fi

# runs LABEL-PREFIX SEEDS...: the metrics files of those seeds' runs, comma-separated (dist_summary's groups).
runs() {
  local prefix=$1 list=""
  shift
  for seed in "$@"; do list+="${list:+,}$(metrics "$prefix-s$seed")"; done
  echo "$list"
}
b=${DIST_BATCH:-8}
if want throughput; then
  big=${DIST_BIG_BATCH:-32}
  rows=()
  for n in 1 2 4 8; do
    (( n <= gpus )) || break
    dist_run "gpus$n-b$((n * b))" $n --set schedule.batch=$((n * b))
    rows+=("$n GPU x $b=$(metrics gpus$n-b$((n * b))):$((n * b))")
  done
  note "-- throughput at $b images per GPU (the default config otherwise)"
  python3 scripts/gpu/dist_summary.py throughput "${rows[@]}" | tee -a "$summary"
  if (( gpus > 1 )); then
    dist_run "gpus1-b$big" 1 --set schedule.batch=$big --set schedule.steps=300
    dist_run "gpus$gpus-b$((gpus * big))" $gpus --set schedule.batch=$((gpus * big)) --set schedule.steps=300
    note "-- throughput at $big images per GPU (300 steps)"
    python3 scripts/gpu/dist_summary.py throughput "1 GPU x $big=$(metrics gpus1-b$big):$big" \
      "$gpus GPU x $big=$(metrics gpus$gpus-b$((gpus * big))):$((gpus * big))" | tee -a "$summary"
  fi
fi

# SyncBatchNorm's cost: all GPUs at $b images each, with and without it (BatchNorm's run also replays the
# CUDA graphs, which SyncBatchNorm over several ranks cannot).
if want syncbn-throughput && (( gpus > 1 )); then
  dist_run "gpus$gpus-b$((gpus * b))" $gpus --set schedule.batch=$((gpus * b))
  dist_run "gpus$gpus-b$((gpus * b))-syncbn" $gpus --set schedule.batch=$((gpus * b)) \
    --set detector.backbone.norm=sync_batch_norm
  note "-- SyncBatchNorm's cost at $b images per GPU"
  python3 scripts/gpu/dist_summary.py throughput "$gpus GPU BN=$(metrics gpus$gpus-b$((gpus * b))):$((gpus * b))" \
    "$gpus GPU SyncBN=$(metrics gpus$gpus-b$((gpus * b))-syncbn):$((gpus * b))" | tee -a "$summary"
fi

read -r -a seeds <<<"${DIST_SEEDS:-0 1 2}"
curve=(--set schedule.eval_every=50 --set schedule.log_every=50)
# Runs on one GPU each, side by side (their times are not for reports; their mAP is): LABEL-PREFIX, then the
# arguments; one run per seed.
one_gpu_seeds() {
  local prefix=$1 i=0
  shift
  for seed in "${seeds[@]}"; do
    CUDA_VISIBLE_DEVICES=$((i % gpus)) dist_run "$prefix-s$seed" 1 --set schedule.seed=$seed "$@" &
    i=$((i + 1))
  done
  wait
}
if want accuracy; then
  # The same total batch (8): one GPU; all GPUs with SyncBatchNorm; all GPUs with each rank's own statistics;
  # and one GPU at one rank's share of the batch, whose BatchNorm sees what each rank's sees.
  one_gpu_seeds one-bn "${curve[@]}"
  one_gpu_seeds small-bn --set schedule.batch=$((8 / gpus)) "${curve[@]}"
  for seed in "${seeds[@]}"; do
    dist_run "all-syncbn-s$seed" $gpus --set schedule.seed=$seed --set detector.backbone.norm=sync_batch_norm "${curve[@]}"
    dist_run "all-bn-s$seed" $gpus --set schedule.seed=$seed "${curve[@]}"
  done
  note "-- accuracy at a total batch of 8 (the default config), seeds ${seeds[*]}"
  python3 scripts/gpu/dist_summary.py curves "1 GPU=$(runs one-bn "${seeds[@]}")" \
    "$gpus GPUs SyncBN=$(runs all-syncbn "${seeds[@]}")" "$gpus GPUs BN per rank=$(runs all-bn "${seeds[@]}")" \
    "1 GPU batch $((8 / gpus))=$(runs small-bn "${seeds[@]}")" | tee -a "$summary"
fi

# The learning rate for a k times larger total batch (all GPUs at 8 images each): the default times 1, sqrt(k)
# and k, for the images of the default run (750 / k steps), then for its steps (750: k times the images).
if want lr && (( gpus > 1 )); then
  k=$gpus
  read -r -a lr_seeds <<<"${DIST_LR_SEEDS:-0 1}"
  for schedule in ${DIST_LR_SCHEDULES:-images steps}; do
    steps=750
    [[ $schedule == images ]] && steps=$((750 / k))
    groups=()
    for rule in "none 1" "sqrt $(python3 -c "print($k ** 0.5)")" "linear $k"; do
      read -r name factor <<<"$rule"
      [[ $schedule == steps && $name == linear ]] && continue  # diverged already at the shorter schedule
      for seed in "${lr_seeds[@]}"; do
        dist_run "lr-$schedule-$name-s$seed" $gpus --set schedule.batch=$((8 * k)) --set schedule.steps=$steps \
          --set schedule.lr="$(python3 -c "print(3e-3 * $factor)")" --set schedule.seed=$seed "${curve[@]}"
      done
      groups+=("lr x $factor ($name)=$(runs "lr-$schedule-$name" "${lr_seeds[@]}")")
    done
    note "-- learning rate at a total batch of $((8 * k)) for $steps steps"
    python3 scripts/gpu/dist_summary.py curves "${groups[@]}" | tee -a "$summary"
  done
fi

if want hosts && (( gpus >= 2 )); then
  half=$((gpus / 2))
  a=$(seq -s, 0 $((half - 1))) b=$(seq -s, $half $((2 * half - 1)))
  hosts=(-np $((2 * half)) -H "host-a:$half,host-b:$half" --mca plm rsh --mca plm_rsh_agent scripts/local-hosts-agent.sh
         --mca plm_rsh_no_tree_spawn 1 --mca btl self,tcp --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo
         -x NCCL_SOCKET_IFNAME=lo -x NCCL_DEBUG=INFO)
  export LOCAL_HOSTS_GPUS="host-a=$a host-b=$b"
  note "-- two hosts played by this machine: host-a has GPUs $a, host-b has GPUs $b"
  mkdir -p "$OUT/dist/hosts"
  rm -rf /tmp/dist/hosts
  timeout 180 "${mpi[@]}" "${hosts[@]}" $minidet train --device cuda --out /tmp/dist/hosts --stop-after 400 \
    --set detector.backbone.norm=sync_batch_norm \
    >"$OUT/dist/hosts/first.txt" 2>&1
  note "first half: exit code $?"
  grep -E "^data parallel|^  rank|stopped" "$OUT/dist/hosts/first.txt" | tee -a "$summary"
  note "NCCL's channels between ranks (P2P or SHM within a host, NET across hosts):"
  grep -oE "Channel 00/[0-9]+ : [0-9]+\[[0-9a-f]+\] -> [0-9]+\[[0-9a-f]+\] (\[[a-z]+\] )?via [A-Za-z0-9/_]+" \
    "$OUT/dist/hosts/first.txt" | sort -u | tee -a "$summary"
  timeout 180 "${mpi[@]}" "${hosts[@]}" $minidet train --device cuda --resume /tmp/dist/hosts >"$OUT/dist/hosts/second.txt" 2>&1
  note "resumed: exit code $?"
  grep -E "^minidet train|^evaluation at|^trained" "$OUT/dist/hosts/second.txt" | tee -a "$summary"
  cp /tmp/dist/hosts/metrics.jsonl "$OUT/dist/hosts/" 2>/dev/null
  unset LOCAL_HOSTS_GPUS
fi
