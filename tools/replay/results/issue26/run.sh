#!/bin/sh
# Issue 26's acceptance replays against one server: both workloads (the conversation trace and
# the tool-agent workload), ReplicaStats every second and none, prefill 6,000 and 9,000 tokens/s
# (1.5x faster), all replicas at one speed and every other replica at half the rate of the
# others (8000,4000 and 12000,6000: the same total capacity as 6000 and 9000), and a gateway that
# follows half of the hints. 1,500 requests each, 8 replicas x 2,000 blocks.
# Each run writes NAME.txt (its command line, then the table), NAME.json and NAME.svg to OUTDIR;
# summarize.py OUTDIR then checks the acceptance ratios.
#
# usage (from the repository root): tools/replay/results/issue26/run.sh HOST:PORT OUTDIR [REPLAY] [ONLY]
#   HOST:PORT: the server, or `in-process` for the replay's in-process index (tools/README.md: no
#   server, trace time, about a second for all eighteen, the same table every run).
#   ONLY: a substring of the run names to run just those (e.g. toolagent_stats-none).
#   REPLAY_ARGS (environment): more replay flags for every run, e.g. REPLAY_ARGS="--speed 5" on a
#   busy machine (summarize.py marks runs whose events ran late: LATE).
# About 1 minute of wall time per run (trace time / 10), 18 runs.
set -eu
server=$1
out=$2
replay=${3:-build/tools/replay/inferencecache-replay}
only=${4:-}
mkdir -p "$out"

run() {
  name=$1
  shift
  case "$name" in *"$only"*) ;; *) return 0 ;; esac
  case "$server" in
    in-process) index="--index in-process" ;;
    *) index="--server $server" ;;
  esac
  # shellcheck disable=SC2086 # $index (two words) and REPLAY_ARGS are lists of flags
  set -- "$replay" $index --requests 1500 --no-progress "$@" ${REPLAY_ARGS:-} \
    --svg "$out/$name.svg" --json-out "$out/$name.json"
  echo "$ $*" > "$out/$name.txt"
  "$@" >> "$out/$name.txt" 2>&1 || echo "exit $?" >> "$out/$name.txt"
  echo "$name done: $(date -u +%H:%M:%S)"
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
