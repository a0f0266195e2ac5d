#!/bin/sh
# Issue 30's P/D replay: the conversation trace's first 1,500 requests over 4 prefill and 4
# decode replicas (2,000 blocks each, 9,000 tokens/s, 16 decode slots), against one server of its
# own (--threads 1) whose --policy-file holds the replay's topology (--pd-topology-out), paced at
# trace time / SPEED. The server's rapid-reset bucket is raised: on a loaded machine pipelined
# PublishEvents past their 10 s deadline are cancelled (RST_STREAM) faster than the default 33/s
# (docs/hostile-peers.md), which would close the replay's ingest connection. Writes OUTDIR/policy.json, OUTDIR/server.log, OUTDIR/pd.txt (the command
# line, then the table) and OUTDIR/pd.json.
#
# usage (from the repository root): tools/replay/results/issue30/run.sh OUTDIR [BUILD] [SPEED]
#   BUILD: the build directory (default build); SPEED: default 10 (use 5 on a busy machine when
#   the table says events ran late).
set -eu
out=$1
build=${2:-build}
speed=${3:-10}
replay=$build/tools/replay/inferencecache-replay
mkdir -p "$out"
set -- --requests 1500 --speed "$speed" --prefill-rate 9000 --rpc-timeout-ms 10000 --pd
"$replay" "$@" --pd-topology-out "$out/policy.json"
"$build/src/inferencecache-server" --threads 1 --insecure-disable-auth \
  --policy-file "$out/policy.json" --grpc-bind-address 127.0.0.1:19390 \
  --http-bind-address 127.0.0.1:19391 --snapshot-bind-address 127.0.0.1:19392 \
  --stream-reset-burst 100000 --stream-reset-rate 10000 \
  > "$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 1
set -- "$replay" --server 127.0.0.1:19390 --no-progress "$@" --json-out "$out/pd.json"
echo "$ $*" > "$out/pd.txt"
"$@" >> "$out/pd.txt" 2>&1 || echo "exit $?" >> "$out/pd.txt"
cat "$out/pd.txt"
