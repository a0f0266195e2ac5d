#!/bin/sh
# Issue 26's eighteen acceptance replays (the runs of ../run.sh: both workloads, ReplicaStats
# every second and none, 6,000 / 9,000 / 8,000,4,000 / 12,000,6,000 tokens/s, and a gateway that
# follows half of the hints; 1,500 requests, 8 replicas x 2,000 blocks) with the replay's
# in-process index (tools/README.md "In-process index"): no server, trace time, about a second
# for all eighteen, the same table every run. Writes NAME.txt and NAME.json per run to OUTDIR;
# ../summarize.py OUTDIR checks the acceptance ratios (its lag column reads 0: nothing is paced).
#
# usage (from the repository root): tools/replay/results/issue26/in-process/run.sh REPLAY OUTDIR
set -eu
replay=$1
out=$2
mkdir -p "$out"

run() {
  name=$1
  shift
  "$replay" --index in-process --requests 1500 --no-progress "$@" --json-out "$out/$name.json" \
    > "$out/$name.txt" 2>&1
}

for workload in conversation toolagent; do
  case $workload in
    conversation) trace=tests/data/traces/mooncake_fast25_conversation_trace.jsonl ;;
    toolagent) trace=tools/replay/workloads/toolagent.jsonl ;;
  esac
  for stats in 1 none; do
    for rate in 6000 9000 8000,4000 12000,6000; do
      run "${workload}_stats-${stats}_rate-$(echo $rate | tr , -)" --trace "$trace" \
        --stats "$stats" --prefill-rate "$rate"
    done
  done
  run "${workload}_follow-half" --trace "$trace" --follow-fraction 0.5
done
